//! A `for` with constant bounds whose iterations share the elements of a stream array
//! (`on work[i % 4]` over `0..8`): iterations on one lane write one chunk, and run in the order
//! written on that lane's stream, so the chunk rule compiles them and the step adds to every
//! chunk once per iteration on its lane. Eager and replayed, on the checked CPU backend (no
//! race) and, ignored without a GPU, on CUDA.

use gpu_pipeline::{Context, DeviceBuffer, Result, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

gpu_pipeline! {
    /// Eight rounds over four lanes (each chunk of `x` gets 1.0 twice), then four rounds over
    /// two lanes (each of the first two chunks of `y` gets 1.0 twice).
    pipeline Lanes {
        streams { main, work[4] }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = crate::cpu::add_scalar;
        }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        for i in 0..8 {
            let lane = i % 4;
            stage sweep on work[lane] {
                launch k::add_scalar(4u32, 1.0f32, x[lane * 4..lane * 4 + 4]) grid 1u32 block 32u32;
            }
        }
        for i in 0..4 {
            stage pairs on work[i % 2] {
                launch k::add_scalar(4u32, 1.0f32, y[(i % 2) * 4..(i % 2) * 4 + 4]) grid 1u32 block 32u32;
            }
        }
    }
}

fn iterations_on_one_lane_run_in_order(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut pipeline = Lanes::new(ctx)?;
    for captured in [false, true] {
        let mut x = DeviceBuffer::<f32>::zeros(&stream, 16)?;
        let mut y = DeviceBuffer::<f32>::zeros(&stream, 8)?;
        stream.synchronize()?;
        let params = LanesParams {
            x: &mut x,
            y: &mut y,
        };
        if captured {
            let mut graph = pipeline.capture(params)?;
            graph.launch()?;
            graph.synchronize()?;
        } else {
            pipeline.run(params)?.wait()?;
        }
        assert_eq!(x.to_vec(&stream)?, vec![2.0f32; 16], "captured: {captured}");
        assert_eq!(y.to_vec(&stream)?, vec![2.0f32; 8], "captured: {captured}");
    }
    Ok(())
}

#[test]
fn cpu_iterations_on_one_lane_run_in_order() {
    let ctx = Context::cpu_checked();
    iterations_on_one_lane_run_in_order(&ctx).unwrap();
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_iterations_on_one_lane_run_in_order() {
    iterations_on_one_lane_run_in_order(&Context::cuda(0).unwrap()).unwrap();
}
