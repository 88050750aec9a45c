//! A kernel on `gpu[0]` writes `halos[1]`, which lives on `gpu[1]`, without declaring it:
//! a kernel reaches another device's memory only where its launch says `peer(halos)`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Ring {
        devices { gpu[2] }
        streams { main on gpu[0], work[2] on gpu[..] }
        unsafe kernels k = ptx("") {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params {
            n: u32,
            fields: &mut [DeviceBuffer<f32>] on gpu[..],
            halos: &mut [DeviceBuffer<f32>] on gpu[..],
        }
        stage send on work[0] {
            launch k::saxpy(n, 1.0, fields[0], halos[1]) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
