//! Each launch clause is given once: a second `grid` is rejected where it starts.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Axpy {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params { n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage axpy on main {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256 grid 1;
        }
    }
}

fn main() {}
