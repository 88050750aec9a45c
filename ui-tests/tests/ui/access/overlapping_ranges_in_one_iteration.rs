//! Two ranges of one launch inside a `for` with constant bounds, evaluated per iteration:
//! with `i = 0` they are `x[0..4]` and `x[2..6]`, which overlap. Make them apart.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Sweeps {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32> }
        for i in 0..2 {
            stage s on main {
                launch k::saxpy(4, 1.0, x[i * 4..i * 4 + 4], x[i * 4 + 2..i * 4 + 6]) grid 1u32 block 32u32;
            }
        }
    }
}

fn main() {}
