//! A `HostWrite` handle holds the graph: it cannot be kept across a launch, so every write
//! through it lands between the same two replays (write the next frame's input after the
//! launch with a new `graph.write_input()`).

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Echo {
        streams { main }
        params { input: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage echo on main { copy input -> out; }
    }
}

fn frames(ctx: &Context, input: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut pipeline = Echo::new(ctx)?;
    let mut graph = pipeline.capture(EchoParams { input, out })?;
    let mut write = graph.write_input()?;
    for frame in 0..4 {
        write.fill(frame as f32)?;
        graph.launch()?;
    }
    Ok(())
}

fn main() {
    let _ = frames;
}
