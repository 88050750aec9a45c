//! `swap` exchanges two buffers for the same stages, whose streams run on one device: two
//! buffers on different devices cannot trade places. Declare both on one device, or copy
//! between them with a stage instead.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main, other on gpu1 }
        params { a: &mut DeviceBuffer<f32>, b: &mut DeviceBuffer<f32> on gpu1 }
        swap(a, b);
        stage clear on main { fill a = 0.0; }
        stage zero on other { fill b = 0.0; }
    }
}

fn main() {}
