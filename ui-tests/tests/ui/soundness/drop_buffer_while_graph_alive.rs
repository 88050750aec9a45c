//! A captured graph borrows its buffers for its whole life: dropping (freeing) `y` while
//! `graph` may still replay would free memory under running GPU work.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Axpy {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params { n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage axpy on main {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn replay(ctx: &Context, x: &DeviceBuffer<f32>, mut y: DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Axpy::new(ctx)?;
    let mut graph = pipeline.capture(AxpyParams { n: 1024, a: 2.0, x, y: &mut y })?;
    graph.launch()?;
    drop(y);
    graph.launch()
}

fn main() {
    let _ = replay;
}
