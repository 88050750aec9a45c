//! Both sides of a copy hold the same element type: `f32` cannot be copied into `u32`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<u32> }
        stage download on main {
            copy y -> out;
        }
    }
}

fn main() {}
