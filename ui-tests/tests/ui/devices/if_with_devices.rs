//! A device `if` in a pipeline over two devices, on the second device's stream: refused like
//! a `while`, whichever device it runs on.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main, other on gpu1 }
        params { a: &mut DeviceBuffer<f32>, flag: &mut DeviceBuffer<u32> on gpu1, b: &mut DeviceBuffer<f32> on gpu1 }
        stage clear on main { fill a = 0.0; }
        stage zero on other {
            if flag != 0u32 {
                fill b = 0.0;
            }
        }
    }
}

fn main() {}
