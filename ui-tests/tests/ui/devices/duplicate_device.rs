//! A device declared twice.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1, gpu0 }
        streams { main }
        params { a: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill a = 0.0;
        }
    }
}

fn main() {}
