//! A captured step: replayed, a scalar updated in place with its typed setter, replayed
//! again; the eager run guard's accessors.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Axpy {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, a: f32, bias: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage axpy on compute {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
            launch k::add_scalar(n, bias + a, y) grid n.div_ceil(256) block 256;
        }
        stage download on copy {
            copy y -> out;
        }
    }
}

fn replay(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut pipeline = Axpy::new(ctx)?;
    let run = pipeline.run(AxpyParams { n: 1024, a: 2.0, bias: 0.5, x, y: &mut *y, out: &mut *out })?;
    let _ = (run.is_complete()?, run.params().a);
    run.wait()?;

    let mut graph = pipeline.capture(AxpyParams { n: 1024, a: 2.0, bias: 0.5, x, y, out })?;
    graph.launch()?;
    graph.set_a(-1.0)?;
    graph.set_bias(0.0)?;
    graph.set_n(512)?;
    graph.launch()?;
    let _ = (graph.node_count()?, graph.params().n, graph.exec());
    graph.synchronize()
}

fn main() {
    let _ = replay;
}
