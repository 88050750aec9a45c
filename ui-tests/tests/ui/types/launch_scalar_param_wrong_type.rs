//! A scalar param passed to a kernel parameter of another primitive type: `n` is declared
//! `u64` but `saxpy` takes `n: u32`. Caught by the macro, on the argument; code using the
//! pipeline reports nothing more (the macro still emits its types and methods).

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Axpy {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params { n: u64, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage axpy on main {
            launch k::saxpy(n, a, x, y) grid 1 block 256;
        }
    }
}

fn replay(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Axpy::new(ctx)?;
    assert_eq!(Axpy::STAGES.len(), 1);
    let mut graph = pipeline.capture(AxpyParams { n: 1024, a: 2.0, x, y })?;
    graph.set_a(-1.0)?;
    graph.launch()?;
    graph.synchronize()
}

fn main() {
    let _ = replay;
}
