//! Kernel signatures are a promise the compiler cannot check (a wrong element type is
//! undefined behaviour on the device), so a kernel block is written `unsafe kernels`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Axpy {
        streams { main }
        kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params { n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage axpy on main {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
