//! A captured graph has a setter for each scalar the step reads: `a` only in a launch
//! (updated in place), `v` in a `fill` value and a `call`, `round` in a flag value and a host
//! closure, `n` in a scratch length (each re-captures the step).

use gpu_pipeline::{Context, DeviceBuffer, FlagCell, PinnedBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Fresh {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, a: f32, v: f32, round: u32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>, flag: &mut FlagCell }
        scratch { tmp: DeviceBuffer<f32> = n as usize }
        stage build on main {
            fill tmp = v;
            launch k::saxpy(n, a, x, tmp) grid n.div_ceil(256) block 256;
            launch k::saxpy(n, 1.0, tmp, y) grid n.div_ceil(256) block 256;
            call mark(v, y) writes(y);
        }
        stage report on side {
            copy y -> out;
            write flag = round;
            host move || println!("round {round}") reads(out);
        }
    }
}

fn mark(_s: &TypedStream<'_, FreshMain>, _v: f32, _y: &mut DeviceBuffer<f32>) -> Result<()> {
    Ok(())
}

fn replay(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>, flag: &mut FlagCell) -> Result<()> {
    let mut pipeline = Fresh::new(ctx)?;
    let mut graph = pipeline.capture(FreshParams { n: 1024, a: 2.0, v: 0.0, round: 1, x, y, out, flag })?;
    graph.set_a(3.0)?;
    graph.set_v(1.0)?;
    graph.set_round(2)?;
    graph.set_n(512)?;
    graph.launch()?;
    graph.synchronize()
}

fn main() {
    let _ = replay;
}
