//! An element of a buffer array passed whole beside a range of it, one of them written: the
//! whole element covers the range, as `x` beside `x[0..4]` does. Pass a separate buffer.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline WholeAndPart {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { xs: &mut [DeviceBuffer<f32>] }
        stage step on main { launch k::saxpy(4, 1.0, xs[1], xs[1][0..4]) grid 1u32 block 32u32; }
    }
}

fn main() {}
