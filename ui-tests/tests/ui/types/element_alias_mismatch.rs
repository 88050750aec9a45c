//! Element types are compared by the compiler, through aliases: `Real` is `f64` here, and
//! `saxpy` takes `x: &[f32]`. The error is on the argument.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

type Real = f64;

gpu_pipeline! {
    pub pipeline Axpy {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, x: &DeviceBuffer<Real>, y: &mut DeviceBuffer<f32> }
        stage axpy on main {
            launch k::saxpy(n, 2.0, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
