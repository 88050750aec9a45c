//! A `fill` of another device's element of a buffer array inside a `for` with constant
//! bounds: a memset reaches only its own device's memory, and every iteration is checked with
//! the loop variable's value, as for a kernel's arguments.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Ring {
        devices { gpu[2] }
        streams { main on gpu[0], work[2] on gpu[..] }
        params { xs: &mut [DeviceBuffer<u32>] on gpu[..] }
        for i in 0..2 {
            stage clear on work[i] {
                fill xs[(i + 1) % 2] = 3u32;
            }
        }
    }
}

fn main() {}
