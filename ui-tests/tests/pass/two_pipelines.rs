//! Two pipelines in one module, with overlapping stream and stage names: each has its own
//! types (`Up`/`UpParams`/`UpMain`, `Down`/...), and one's output feeds the other.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Up {
        streams { main }
        params { input: &PinnedBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage run on main { copy input -> y; }
    }
}

gpu_pipeline! {
    pipeline Down {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage run on main {
            launch k::add_scalar(n, 1.0, y) grid n.div_ceil(256) block 256;
            copy y -> out;
        }
    }
}

fn step(ctx: &Context, input: &PinnedBuffer<f32>, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut up = Up::new(ctx)?;
    let mut down = Down::new(ctx)?;
    let _: (&gpu_pipeline::Stream, &gpu_pipeline::Stream, UpMain, DownMain) =
        (up.main_stream(), down.main_stream(), UpMain, DownMain);
    up.run(UpParams { input, y: &mut *y })?.wait()?;
    down.run(DownParams { n: 1024, y, out })?.wait()
}

fn main() {
    let _ = step;
}
