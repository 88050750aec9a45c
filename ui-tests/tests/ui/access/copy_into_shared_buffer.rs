//! A copy writes its destination, which must be declared `&mut`: `out` is declared `&`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &PinnedBuffer<f32> }
        stage download on main {
            copy y -> out;
        }
    }
}

fn main() {}
