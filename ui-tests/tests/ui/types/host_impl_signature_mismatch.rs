//! A kernel's host implementation takes its parameters as declared: `dst: &mut [f32]`, not
//! `&mut [f64]`. The mismatch is reported at `host = ...`, with the declaration as the
//! expected type.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

fn copy_host(_n: u32, _src: &[f32], _dst: &mut [f64]) {}

gpu_pipeline! {
    pub pipeline Copy {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn copy(n: u32, src: &[f32; unbounded], dst: &mut [f32; unbounded]) host = copy_host;
        }
        params { n: u32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage copy on main {
            launch k::copy(n, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
