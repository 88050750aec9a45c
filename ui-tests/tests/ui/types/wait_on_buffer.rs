//! `wait` polls a flag cell; `y` is a device buffer.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Gate {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage gate on main {
            wait y == 1;
            fill y = 0.0;
        }
    }
}

fn main() {}
