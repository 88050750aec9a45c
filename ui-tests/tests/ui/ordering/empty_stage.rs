//! A stage does something: an empty stage is allowed only with `after`, as a barrier.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
        }
        stage idle on main {}
    }
}

fn main() {}
