//! `recapture_with` may put another buffer in the params only if it is borrowed as long as
//! the graph: one freed before the graph's next replay is a borrow error (the replay would
//! write freed memory). Declare the new buffer before the graph.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, Stream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Frames {
        streams { main }
        params { x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage save on main { copy x -> out; }
    }
}

fn replay(ctx: &Context, x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut pipeline = Frames::new(ctx)?;
    let mut graph = pipeline.capture(FramesParams { x, out })?;
    graph.launch()?;
    {
        let mut local = DeviceBuffer::<f32>::zeros(&Stream::new(ctx)?, 4)?;
        let _ = graph.recapture_with(|p| p.x = &mut local)?;
    }
    graph.launch()?;
    Ok(())
}

fn main() {
    let _ = replay;
}
