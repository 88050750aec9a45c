//! Both buffers of a `swap` stay borrowed by the graph for its whole life, whichever one the
//! step currently writes: using one on the host while the graph may replay is a borrow
//! error.

use gpu_pipeline::{Context, DeviceBuffer, Result, Stream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline PingPong {
        streams { main }
        params { field: &mut DeviceBuffer<f32>, next: &mut DeviceBuffer<f32> }
        swap(field, next);
        stage step on main { copy field -> next; }
    }
}

fn replay(ctx: &Context, stream: &Stream, field: &mut DeviceBuffer<f32>, next: &mut DeviceBuffer<f32>) -> Result<Vec<f32>> {
    let mut pipeline = PingPong::new(ctx)?;
    let mut graph = pipeline.capture(PingPongParams { field, next })?;
    graph.launch()?;
    graph.swap_field_next()?;
    let old = next.to_vec(stream)?;
    graph.launch()?;
    Ok(old)
}

fn main() {
    let _ = replay;
}
