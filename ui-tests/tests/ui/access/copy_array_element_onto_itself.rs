//! A copy from a constant element of a buffer array onto the same element: `copy xs[0] ->
//! xs[0]` copies a buffer onto itself, as `copy y -> y` does. Name two different buffers.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Itself {
        streams { main }
        params { xs: &mut [DeviceBuffer<f32>] }
        stage step on main { copy xs[0] -> xs[0]; }
    }
}

fn main() {}
