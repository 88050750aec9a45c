//! A captured graph's setter changes what the step reads; `dt` is a param no statement reads
//! (the kernel was meant to take it), so `set_dt` would change nothing. Pass the param to what
//! should use it, or give the new value to the next `run` or `capture`.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Drift {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, dt: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage drift on main {
            launch k::saxpy(n, 1.0, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn replay(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Drift::new(ctx)?;
    let mut graph = pipeline.capture(DriftParams { n: 1024, dt: 0.1, x, y })?;
    graph.set_dt(0.05)?;
    graph.launch()
}

fn main() {
    let _ = replay;
}
