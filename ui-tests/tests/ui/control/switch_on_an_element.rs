//! A `switch` on one element of a buffer: it reads the first element of a whole buffer.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { residual: &mut DeviceBuffer<f32>, modes: &mut DeviceBuffer<u32> }
        stage solve on main {
            switch modes[5] {
                0 => { fill residual = 0.0f32; }
            }
        }
    }
}

fn main() {}
