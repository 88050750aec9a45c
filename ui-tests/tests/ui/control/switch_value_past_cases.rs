//! A `switch` whose value a `fill` sets, last before it, to a constant no case is labelled with: CUDA runs no body for a value of 2 or more of 2 cases, at every step.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { residual: &mut DeviceBuffer<f32>, mode: &mut DeviceBuffer<u32> }
        stage choose on side { fill mode = 2u32; }
        stage solve on main {
            switch mode {
                0 => { launch k::add_scalar(1u32, 1.0f32, residual) grid 1u32 block 1u32; }
                1 => { fill residual = 0.0f32; }
            }
        }
    }
}

fn main() {}
