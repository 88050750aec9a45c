//! `swap(a, b);` in a stage's body, outside any loop: it ends a loop body, or is declared
//! beside the stages to exchange the buffers between steps.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { n: u32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage solve on main {
            launch k::saxpy(n, 1.0f32, x, y) grid 1u32 block 32u32;
            swap(x, y);
        }
    }
}

fn main() {}
