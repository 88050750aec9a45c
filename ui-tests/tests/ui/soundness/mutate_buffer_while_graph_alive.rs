//! A captured graph borrows its buffers for its whole life: writing the pinned input on the
//! host while `graph` may still replay would race with the GPU reading it.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Upload {
        streams { main }
        params { input: &PinnedBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage upload on main {
            copy input -> y;
        }
    }
}

fn replay(ctx: &Context, input: &mut PinnedBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Upload::new(ctx)?;
    let mut graph = pipeline.capture(UploadParams { input: &*input, y })?;
    graph.launch()?;
    input.as_mut_slice()?[0] = 1.0;
    graph.launch()
}

fn main() {
    let _ = replay;
}
