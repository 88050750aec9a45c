//! A pipeline body holds `streams`, `kernels`, `params`, `scratch`, `stage` and `concurrent`
//! items: `stream` (singular) is none of them.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        stream { main }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
