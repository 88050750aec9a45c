//! Launch dimensions are computed on the host when the step is enqueued, before the stages
//! that write a buffer have run: `count.load()` reads a flag the GPU writes. Use a scalar
//! param (a buffer's length, `x.len()`, is fine).

use gpu_pipeline::{DeviceBuffer, FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Compact {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, y: &mut DeviceBuffer<f32>, count: &mut FlagCell }
        stage count_up on side {
            write count = 4;
        }
        stage scale on main {
            launch k::add_scalar(n, 1.0, y) grid count.load() block 256;
        }
    }
}

fn main() {}
