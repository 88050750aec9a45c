//! `after` inside a branch: a stage waits as a whole, from its header.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { tol: f32, residual: &mut DeviceBuffer<f32>, other: &mut DeviceBuffer<f32> }
        stage first on side {
            launch k::add_scalar(1u32, -1.0f32, other) grid 1u32 block 1u32;
        }
        stage solve on main {
            if residual > tol {
                after first;
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
