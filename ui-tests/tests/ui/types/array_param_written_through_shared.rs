//! An array of buffers declared `&` and written: the message suggests the array's type,
//! `&mut [DeviceBuffer<f32>]` (issue 23, class 6).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Parts {
        streams { main }
        params { parts: &[DeviceBuffer<f32>] }
        stage clear on main { fill parts[0] = 0.0; }
    }
}

fn main() {}
