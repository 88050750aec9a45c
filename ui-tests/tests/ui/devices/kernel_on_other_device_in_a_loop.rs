//! A kernel given another device's buffer inside a `for` (issue 23, class 3): every iteration
//! of a loop with constant bounds is checked, and a loop over a param compares the indices as
//! polynomials.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Ring {
        devices { gpu[4] }
        streams { main on gpu[0], work[4] on gpu[..] }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params {
            nx: usize,
            rounds: usize,
            fields: &mut [DeviceBuffer<f32>] on gpu[..],
            halos: &mut [DeviceBuffer<f32>] on gpu[..],
        }
        for i in 0..4 {
            stage send on work[i] {
                launch k::saxpy(nx as u32, 1.0, fields[i][..nx], halos[(i + 1) % 4][..nx]) grid 1u32 block 256u32;
            }
        }
        for r in 0..rounds {
            stage mix on work[r] {
                launch k::saxpy(nx as u32, 0.5, halos[r][..nx], fields[r + 1][..nx]) grid 1u32 block 256u32;
            }
        }
    }
}

fn main() {}
