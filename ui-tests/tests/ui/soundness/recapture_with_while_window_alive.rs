//! A window holds the graph: `recapture_with` (which may hand a buffer the window's slices
//! read back to the host) cannot run while the window or one of its slices lives. End the
//! window first (read what you need into a `Vec`), then recapture.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Frames {
        streams { main }
        params { x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage save on main { copy x -> out; }
    }
}

fn replay(
    ctx: &Context,
    x: &mut DeviceBuffer<f32>,
    spare: &mut DeviceBuffer<f32>,
    out: &mut PinnedBuffer<f32>,
) -> Result<f32> {
    let mut pipeline = Frames::new(ctx)?;
    let mut graph = pipeline.capture(FramesParams { x, out })?;
    graph.launch()?;
    let window = graph.window()?;
    let last = window.out()?;
    let _ = graph.recapture_with(|p| p.x = spare)?;
    Ok(last[0])
}

fn main() {
    let _ = replay;
}
