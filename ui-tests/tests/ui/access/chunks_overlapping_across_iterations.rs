//! Chunks written on streams of their own that overlap by one element from one iteration to
//! the next (issue 23, class 3): with bounds that are params (compared as polynomials in the
//! loop variable) and with constant bounds (every iteration evaluated).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Chunks {
        streams { main, work[4] }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { chunks: usize, s: usize, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        for i in 0..chunks {
            stage double on work[i % 4] {
                launch k::add_scalar(s as u32 + 1, 1.0, x[i * s..(i + 1) * s + 1]) grid 1u32 block 256u32;
            }
        }
        for j in 0..4 {
            let lo = j * 250;
            stage clear on work[j] { fill y[lo..lo + 251] = 0.0; }
        }
    }
}

fn main() {}
