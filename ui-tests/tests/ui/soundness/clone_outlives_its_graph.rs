//! A clone of a captured step borrows the graph it was cloned from (and with it the params):
//! it cannot outlive that graph, whose drop ends the params' borrow. Keep the graph alive as
//! long as the clone.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Frames {
        streams { main }
        params { x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage save on main { copy x -> out; }
    }
}

fn replay(ctx: &Context, x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut pipeline = Frames::new(ctx)?;
    let mut clone = {
        let mut graph = pipeline.capture(FramesParams { x, out })?;
        graph.clone_step()?
    };
    clone.launch()?;
    Ok(())
}

fn main() {
    let _ = replay;
}
