//! `alloc` inside a stage: a step is captured once and replayed, so memory is allocated with
//! the pipeline; declare the buffer in `scratch { ... }`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage download on main {
            alloc tmp = 1024;
            copy y -> out;
        }
    }
}

fn main() {}
