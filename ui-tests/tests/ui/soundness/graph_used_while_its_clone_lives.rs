//! A clone of a captured step borrows the graph it was cloned from (and with it the params
//! and the pipeline) for its life: the two never replay at once, so launching the original
//! while the clone is alive is a borrow error. Drop the clone first.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Mirror {
        streams { main }
        params { field: &DeviceBuffer<f32>, next: &mut DeviceBuffer<f32> }
        stage step on main { copy field -> next; }
    }
}

fn replay(ctx: &Context, field: &DeviceBuffer<f32>, next: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Mirror::new(ctx)?;
    let mut graph = pipeline.capture(MirrorParams { field, next })?;
    let mut clone = graph.clone_step()?;
    clone.launch()?;
    graph.launch()?;
    clone.launch()
}

fn main() {
    let _ = replay;
}
