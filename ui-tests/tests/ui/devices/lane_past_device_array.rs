//! A stage on `work[3]` of a stream array with one stream per device of `gpu[3]`: the lane
//! is past the array (`work[0]` to `work[2]`).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Ring {
        devices { gpu[3] }
        streams { main on gpu[0], work[3] on gpu[..] }
        unsafe kernels k = ptx("") {
            fn scale(n: u32, data: &mut [f32; n]);
        }
        params { n: u32, fields: &mut [DeviceBuffer<f32>] on gpu[..] }
        stage grow on work[3] {
            launch k::scale(n, fields[2]) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
