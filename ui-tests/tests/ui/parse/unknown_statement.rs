//! A statement keyword the language does not have (`memset`): the error lists the ones it does.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            memset y = 0.0;
        }
    }
}

fn main() {}
