//! Pageable host memory (`&mut Vec<f32>`) in a copy: only pinned memory copies
//! asynchronously or can be captured, so the destination must be a `PinnedBuffer`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &mut Vec<f32> }
        stage download on main {
            copy y -> out;
        }
    }
}

fn main() {}
