//! `recapture` replaces the params without waiting for the launches in flight: the buffers
//! of the old params stay borrowed for the graph's whole life, so using one on the host
//! while the graph lives is a borrow error (a launch may still write it). To take a buffer
//! back at once, exchange it in `recapture_with`, which waits first.

use gpu_pipeline::{Context, DeviceBuffer, Result, Stream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Mirror {
        streams { main }
        params { field: &DeviceBuffer<f32>, next: &mut DeviceBuffer<f32> }
        stage step on main { copy field -> next; }
    }
}

fn replay(ctx: &Context, stream: &Stream, field: &DeviceBuffer<f32>, next: &mut DeviceBuffer<f32>, other: &mut DeviceBuffer<f32>) -> Result<Vec<f32>> {
    let mut pipeline = Mirror::new(ctx)?;
    let mut graph = pipeline.capture(MirrorParams { field, next })?;
    graph.launch()?;
    let _ = graph.recapture(MirrorParams { field, next: other })?;
    let old = next.to_vec(stream)?;
    graph.launch()?;
    Ok(old)
}

fn main() {
    let _ = replay;
}
