//! Streams take `priority = ...` and `non_blocking`; `blocking` is not an option.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main(blocking) }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
