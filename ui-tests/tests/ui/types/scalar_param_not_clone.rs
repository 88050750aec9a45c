//! Scalar params are given to each step by value (cloned, so an `Arc` or a `Vec` works):
//! a param type must implement `Clone`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

pub struct Log;

gpu_pipeline! {
    pub pipeline Logged {
        streams { main }
        params { log: Log, x: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill x = 0.0;
            host move || { let _ = &log; };
        }
    }
}

fn main() {}
