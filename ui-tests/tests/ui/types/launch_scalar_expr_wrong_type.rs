//! A scalar expression of the wrong type: `a * 2.0` is an `f64` here (`a` is), but
//! `saxpy` takes `a: f32`. The macro cannot see expression types; the generated type
//! assertion puts rustc's error on the user's argument.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Axpy {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params { n: u32, a: f64, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage axpy on main {
            launch k::saxpy(n, a * 2.0, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
