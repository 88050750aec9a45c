//! CUDA runs lower priority numbers first and clamps positive ones to 0, the least urgent:
//! `priority = 5` meant as urgent would make the stream a background one. Write `priority =
//! high` or a negative number.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Urgent {
        streams { compute(priority = 5), copy }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on compute {
            fill y = 0.0;
        }
    }
}

fn main() {}
