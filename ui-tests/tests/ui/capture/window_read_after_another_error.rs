//! One mistake, one error: the stage launches a kernel the module does not declare, and the
//! code reading a pinned buffer through the graph's window further down (arithmetic on its
//! `f32` elements) is no second one.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Drift {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { n: u32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage drift on main {
            launch k::saxpi(n, 1.0, x, y) grid n.div_ceil(256) block 256;
            copy y -> out;
        }
    }
}

fn replay(
    ctx: &Context,
    x: &mut DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
    out: &mut PinnedBuffer<f32>,
) -> Result<f32> {
    let mut pipeline = Drift::new(ctx)?;
    let mut graph = pipeline.capture(DriftParams { n: 1024, x, y, out })?;
    graph.launch()?;
    let mut window = graph.window()?;
    let first = window.out()?[0] - 1.0;
    window.out_mut()?[0] = 2.0 * first;
    Ok(first)
}

fn main() {
    let _ = replay;
}
