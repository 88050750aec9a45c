//! A `switch` on a buffer of `f32`: the value selects a case, so it is a `u32`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { tol: f32, residual: &mut DeviceBuffer<f32>, mode: &mut DeviceBuffer<u32> }
        stage solve on main {
            switch residual {
                0 => { fill residual = 0.0f32; }
            }
        }
    }
}

fn main() {}
