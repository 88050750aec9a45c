//! Params borrow their memory: `y: DeviceBuffer<f32>` takes the buffer by value. Declare
//! `&mut DeviceBuffer<f32>`, or move it to `scratch` for a buffer the pipeline owns.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
