//! `n: u32 on gpu1`: a scalar is copied into each step on the host; only buffers live on a
//! device.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main }
        params { n: u32 on gpu1, a: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill a = 0.0;
        }
    }
}

fn main() {}
