//! A stage cannot run `after` itself.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main after clear {
            fill y = 0.0;
        }
    }
}

fn main() {}
