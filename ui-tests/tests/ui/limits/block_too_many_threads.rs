//! A block runs at most 1024 threads over its three dimensions: `(32, 32, 2)` is 2048. Use
//! smaller blocks and a larger grid.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Stencil {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, y: &mut DeviceBuffer<f32> }
        stage step on main {
            launch k::add_scalar(n, 1.0, y) grid (n / 32, n / 32) block (32, 32, 2);
        }
    }
}

fn main() {}
