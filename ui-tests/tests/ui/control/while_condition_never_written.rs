//! A device loop whose body never writes the element its condition reads: the test gives the
//! same answer every time, so the loop runs to `max` (issue 23, class 4).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Stuck {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { tol: f32, residual: &mut DeviceBuffer<f32>, field: &mut DeviceBuffer<f32>, norms: &mut DeviceBuffer<f32> }
        stage solve on main {
            while residual > tol max 100 {
                launch k::add_scalar(64, 1.0, field) grid 1u32 block 64u32;
            }
        }
        stage other on main {
            do {
                launch k::add_scalar(1, -1.0, norms[1..2]) grid 1u32 block 1u32;
            } while norms > tol max 100;
        }
    }
}

fn main() {}
