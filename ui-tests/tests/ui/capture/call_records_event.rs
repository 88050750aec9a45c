//! The macro records every event a step needs; a called function that records its own
//! cannot be part of the derived order.

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
    stream.record().map(drop)
}

fn main() {}
