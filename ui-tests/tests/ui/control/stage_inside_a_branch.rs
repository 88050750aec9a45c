//! A stage declared inside an `if`: stages sit beside each other, each with its own `if`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { tol: f32, residual: &mut DeviceBuffer<f32>, other: &mut DeviceBuffer<f32> }
        stage solve on main {
            if residual > tol {
                stage inner on side {
                    launch k::add_scalar(1u32, -1.0f32, other) grid 1u32 block 1u32;
                }
            }
        }
    }
}

fn main() {}
