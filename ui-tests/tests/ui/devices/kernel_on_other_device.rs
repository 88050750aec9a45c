//! A kernel on `gpu0` given a buffer that lives on `gpu1`: a kernel reaches only its own
//! device's memory. Copy the buffer to `gpu0` in an earlier stage (a peer copy), or run the
//! stage on a stream of `gpu1`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main on gpu0, other on gpu1 }
        unsafe kernels k = ptx("") {
            fn scale(n: u32, data: &mut [f32; unbounded]);
        }
        params { n: u32, left: &mut DeviceBuffer<f32>, right: &mut DeviceBuffer<f32> on gpu1 }
        stage grow on main {
            launch k::scale(n, right) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
