//! `wait_event` waits on an event from outside the pipeline, which a captured graph cannot
//! replay: order stages with `after`, or wait on a `FlagCell` param.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage download on main {
            wait_event ready;
            copy y -> out;
        }
    }
}

fn main() {}
