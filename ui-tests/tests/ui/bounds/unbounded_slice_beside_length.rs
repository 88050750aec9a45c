//! A slice with no bound in a kernel that takes an integer: copied as is, `n > y.len()`
//! would write past `y`. Written on purpose it is `y: &mut [f32; n]` (bound) or
//! `y: &mut [f32; unbounded]` (the kernel checks its own indices).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Axpy {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32]);
        }
        params { n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage run on main {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
