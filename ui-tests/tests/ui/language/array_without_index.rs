//! An array of buffers is passed one element at a time: `xs[k]`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Many {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { xs: &mut [DeviceBuffer<f32>] }
        stage bump on main { launch k::add_scalar(16, 1.0, xs) grid 1u32 block 32u32; }
    }
}

fn main() {}
