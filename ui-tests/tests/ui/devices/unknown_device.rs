//! `on gpu2` names no declared device (with "did you mean").

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main }
        params { a: &mut DeviceBuffer<f32> on gpu2 }
        stage clear on main {
            fill a = 0.0;
        }
    }
}

fn main() {}
