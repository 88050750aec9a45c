//! `call` hands a plain Rust function the stage's typed stream and the buffers it declares,
//! the escape hatch for library calls. The marker type pins the function to this pipeline's
//! `blas` stream; a library generic over the marker takes any pipeline's stream, and reaches
//! what a captured graph can replay (here the raw handle a CUDA library would take).

use gpu_pipeline::{Context, DeviceBuffer, Result, TypedStream, gpu_pipeline};

/// Stands in for a library handle (cuBLAS, NCCL).
pub struct Handle;

fn gemv(
    stream: &TypedStream<SolverBlas>,
    handle: &Handle,
    alpha: f32,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
) -> Result<()> {
    let _ = (stream.label(), handle, alpha, x, y);
    Ok(())
}

fn norm<M>(stream: &TypedStream<'_, M>, y: &DeviceBuffer<f32>) -> Result<()> {
    let _ = (stream.handle(), stream.is_capturing()?, y);
    Ok(())
}

gpu_pipeline! {
    pub pipeline Solver {
        streams { blas, other }
        params { alpha: f32, handle: &Handle, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage apply on blas {
            call gemv(handle, alpha * 2.0, x, y) reads(handle, x) writes(y);
        }
        stage measure on other {
            call norm(&y) reads(y);
        }
    }
}

fn step(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Solver::new(ctx)?;
    pipeline.run(SolverParams { alpha: 1.0, handle: &Handle, x, y })?.wait()
}

fn main() {
    let _ = step;
}
