//! `after` names a declared stage: there is no stage `prepare`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { compute, copy }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage clear_x on compute {
            fill x = 0.0;
        }
        stage clear_y on copy after prepare {
            fill y = 0.0;
        }
    }
}

fn main() {}
