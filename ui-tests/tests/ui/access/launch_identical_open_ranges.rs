//! Two identical ranges that run to the end from element 0 (`x[0..]` twice), one written:
//! both name every element. Name elements that do not overlap, or a second buffer.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline SameRange {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { n: u32, x: &mut DeviceBuffer<f32> }
        stage step on main { launch k::saxpy(n, 1.0, x[0..], x[0..]) grid 1u32 block 32u32; }
    }
}

fn main() {}
