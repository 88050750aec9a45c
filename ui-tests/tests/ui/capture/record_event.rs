//! `record_event` wires an event by hand; the macro derives every event from the accesses.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage download on main {
            copy y -> out;
            record_event done;
        }
    }
}

fn main() {}
