//! `copy` in each direction a stream can copy asynchronously: pinned to device, device to
//! device, device to pinned.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline RoundTrip {
        streams { main }
        params {
            input: &PinnedBuffer<f64>,
            a: &mut DeviceBuffer<f64>,
            b: &mut DeviceBuffer<f64>,
            output: &mut PinnedBuffer<f64>,
        }
        stage upload on main { copy input -> a; }
        stage across on main { copy a -> b; }
        stage download on main { copy b -> output; }
    }
}

fn step(
    ctx: &Context,
    input: &PinnedBuffer<f64>,
    a: &mut DeviceBuffer<f64>,
    b: &mut DeviceBuffer<f64>,
    output: &mut PinnedBuffer<f64>,
) -> Result<Vec<f64>> {
    let mut pipeline = RoundTrip::new(ctx)?;
    pipeline.run(RoundTripParams { input, a, b, output: &mut *output })?.wait()?;
    output.to_vec()
}

fn main() {
    let _ = step;
}
