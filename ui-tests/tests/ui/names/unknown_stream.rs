//! `on` names a declared stream: `cmpute` is a typo of `compute`, and the message says so.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { compute, copy }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on cmpute {
            fill y = 0.0;
        }
    }
}

fn main() {}
