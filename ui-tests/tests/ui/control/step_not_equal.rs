//! The step counter tested with `!=`: only `==` selects steps; the rest goes in an `else`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32> }
        stage solve on main {
            if step % 3 != 0 {
                launch k::add_scalar(1u32, 1.0f32, x) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
