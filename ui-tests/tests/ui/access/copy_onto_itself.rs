//! `copy y -> y` copies a buffer onto itself: name two different buffers.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Mirror {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage mirror on main {
            copy y -> y;
        }
    }
}

fn main() {}
