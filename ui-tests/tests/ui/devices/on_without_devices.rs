//! `on gpu1` in a pipeline that declares no devices. Add `devices { gpu0, gpu1 }`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        streams { main, other on gpu1 }
        params { a: &mut DeviceBuffer<f32> }
        stage clear on other {
            fill a = 0.0;
        }
    }
}

fn main() {}
