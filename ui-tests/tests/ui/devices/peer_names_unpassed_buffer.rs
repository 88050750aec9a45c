//! `peer(halos)` on a launch that does not pass `halos`: name only buffer arguments of the
//! launch that may live on another device.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Ring {
        devices { gpu[2] }
        streams { main on gpu[0], work[2] on gpu[..] }
        unsafe kernels k = ptx("") {
            fn scale(n: u32, data: &mut [f32; n]);
        }
        params {
            n: u32,
            fields: &mut [DeviceBuffer<f32>] on gpu[..],
            halos: &mut [DeviceBuffer<f32>] on gpu[..],
        }
        stage grow on work[0] {
            launch k::scale(n, fields[0]) grid n.div_ceil(256) block 256 peer(halos);
        }
    }
}

fn main() {}
