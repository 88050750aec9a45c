//! No supported GPU gives a block more than 227 KiB of dynamic shared memory.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Reduce {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, y: &mut DeviceBuffer<f32> }
        stage step on main {
            launch k::add_scalar(n, 1.0, y) grid n.div_ceil(256) block 256 shared 256 * 1024;
        }
    }
}

fn main() {}
