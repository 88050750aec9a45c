//! `else if`, which the language spells as a nested test or a `switch`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { tol: f32, residual: &mut DeviceBuffer<f32>, mode: &mut DeviceBuffer<u32> }
        stage solve on main {
            if residual > tol {
                fill residual = 0.0f32;
            } else if mode != 0u32 {
                fill residual = 1.0f32;
            }
        }
    }
}

fn main() {}
