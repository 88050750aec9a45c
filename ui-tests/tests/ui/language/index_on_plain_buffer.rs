//! A buffer is not an array of buffers: a range of its elements is `x[a..b]`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline One {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { x: &mut DeviceBuffer<f32> }
        stage bump on main { launch k::add_scalar(16, 1.0, x[2]) grid 1u32 block 32u32; }
    }
}

fn main() {}
