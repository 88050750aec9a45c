//! One mistake, one error: the stage launches a kernel the module does not declare, and the
//! host write further down (`write_x`, which the real expansion would have) is no second one.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Drift {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { n: u32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage drift on main {
            launch k::saxpi(n, 1.0, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn replay(ctx: &Context, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Drift::new(ctx)?;
    let mut graph = pipeline.capture(DriftParams { n: 1024, x, y })?;
    graph.write_x()?.fill(1.0)?;
    graph.launch()
}

fn main() {
    let _ = replay;
}
