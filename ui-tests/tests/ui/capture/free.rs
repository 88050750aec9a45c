//! `free` inside a stage: a replayed graph would free memory it still uses.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage download on main {
            copy y -> out;
            free y;
        }
    }
}

fn main() {}
