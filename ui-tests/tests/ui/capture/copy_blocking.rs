//! `copy_blocking` returns only when the copy is done, which blocks the host and cannot be
//! captured in a graph: write `copy y -> out` into a `PinnedBuffer`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage download on main {
            copy_blocking y -> out;
        }
    }
}

fn main() {}
