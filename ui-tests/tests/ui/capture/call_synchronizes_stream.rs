//! The stream a stage's `call` gets offers only what a captured graph can replay: blocking
//! the host with `synchronize` fails every `capture()`. The host waits for the whole step
//! outside the pipeline instead.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Exchange {
        streams { main }
        params { halo: &mut DeviceBuffer<f32> }
        stage exchange on main {
            call exchange(halo) writes(halo);
        }
    }
}

fn exchange(stream: &TypedStream<ExchangeMain>, _halo: &mut DeviceBuffer<f32>) -> Result<()> {
    stream.synchronize()
}

fn main() {}
