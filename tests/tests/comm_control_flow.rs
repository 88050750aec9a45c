//! A step with communication and a device `if`/`while`: it runs eagerly, deciding each
//! condition at each step (checked CPU backend, one rank). Capturing it is refused at compile
//! time (ui-tests `collective/capture_with_a_device_condition.rs`): such a step is captured
//! from its streams, which decided every condition once, at capture, and replayed that.

use gpu_pipeline::{Communicator, Context, DeviceBuffer, Stream, gpu_pipeline};

mod cpu {
    pub use tests::condition_kernels::step;

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

gpu_pipeline! {
    /// Adds 1 to `x` on every other step, counts `u` down to 0 through `v`, and sums `y` over
    /// the ranks.
    pub pipeline Decide {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        unsafe kernels t = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            comm: &Communicator,
            x: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
            u: &mut DeviceBuffer<u32>,
            v: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
        }
        stage every on main {
            if step % 2 == 0 {
                launch t::add_scalar(1u32, 1.0f32, x) grid 1u32 block 1u32;
            }
        }
        stage count on main {
            while r > 0u32 max 100 {
                launch k::gp_step(u, v, r) grid 1u32 block 1u32;
                swap(u, v);
            }
        }
        stage reduce on main { all_reduce(sum) y; }
    }
}

#[test]
fn an_eager_step_with_communication_decides_each_condition_at_each_step() {
    let comms = Communicator::cpu_ranks(1).unwrap();
    let ctx = Context::cpu_checked();
    let stream = Stream::new(&ctx).unwrap();
    let mut x = DeviceBuffer::from_slice(&stream, &[0.0f32]).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &[1.0f32]).unwrap();
    let mut u = DeviceBuffer::from_slice(&stream, &[3u32]).unwrap();
    let mut v = DeviceBuffer::from_slice(&stream, &[0u32]).unwrap();
    let mut r = DeviceBuffer::from_slice(&stream, &[3u32]).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Decide::new(&ctx).unwrap();
    for _ in 0..4 {
        pipeline
            .run(DecideParams {
                comm: &comms[0],
                x: &mut x,
                y: &mut y,
                u: &mut u,
                v: &mut v,
                r: &mut r,
            })
            .unwrap()
            .wait()
            .unwrap();
    }
    assert_eq!(x.to_vec(&stream).unwrap(), [2.0], "steps 0 and 2 of 4");
    assert_eq!(
        u.to_vec(&stream).unwrap(),
        [0],
        "three sweeps, the last under `u`"
    );
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
}
