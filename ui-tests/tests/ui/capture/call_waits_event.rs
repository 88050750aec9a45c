//! A captured graph cannot wait on an event recorded outside it: the macro orders stages from
//! their declared accesses, `after`, and flag waits.

use gpu_pipeline::{DeviceBuffer, Event, Result, TypedStream, gpu_pipeline};

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
    let arrived: Option<&Event> = None;
    match arrived {
        Some(event) => stream.wait_event(event),
        None => Ok(()),
    }
}

fn main() {}
