//! A window's slices end with the window, and the window ends before the graph launches
//! again: reading the output while the next replay may write it is a borrow error.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Frames {
        streams { main }
        params { x: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage save on main { copy x -> out; }
    }
}

fn replay(ctx: &Context, x: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<f32> {
    let mut pipeline = Frames::new(ctx)?;
    let mut graph = pipeline.capture(FramesParams { x, out })?;
    let window = graph.window()?;
    let last = window.out()?;
    graph.launch()?;
    Ok(last[0])
}

fn main() {
    let _ = replay;
}
