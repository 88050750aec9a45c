//! One buffer passed twice to one launch where a use writes: kernels assume their pointer
//! parameters do not alias, so `saxpy(n, a, y, y)` would race on the GPU.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Axpy {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params { n: u32, a: f32, y: &mut DeviceBuffer<f32> }
        stage axpy on main {
            launch k::saxpy(n, a, y, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
