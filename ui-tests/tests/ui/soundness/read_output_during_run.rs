//! An eager step borrows its params until it is waited on: reading the pinned output on the
//! host while `run` is alive would read memory the GPU is still writing. Call
//! `run.wait()?` first.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage download on main {
            copy y -> out;
        }
    }
}

fn step(ctx: &Context, y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<f32> {
    let mut pipeline = Download::new(ctx)?;
    let run = pipeline.run(DownloadParams { y, out: &mut *out })?;
    let first = out.as_slice()?[0];
    run.wait()?;
    Ok(first)
}

fn main() {
    let _ = step;
}
