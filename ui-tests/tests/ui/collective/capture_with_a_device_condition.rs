//! A step that communicates is captured from its streams, where a conditional node cannot be
//! recorded: `if step % 2 == 0` would be decided once, at capture, and every replay would
//! run its body. Running the step eagerly decides it at each step; capturing it is refused.

use gpu_pipeline::{Communicator, Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Every {
        streams { main }
        params { comm: &Communicator, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage snapshot on main {
            if step % 2 == 0 { fill x = 1.0; }
        }
        stage reduce on main { all_reduce(sum) y; }
    }
}

fn steps(ctx: &Context, comm: &Communicator, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Every::new(ctx)?;
    pipeline.run(EveryParams { comm, x: &mut *x, y: &mut *y })?.wait()?;
    let mut graph = pipeline.capture(EveryParams { comm, x, y })?;
    graph.launch()
}

fn main() {
    let _ = steps;
}
