//! A bound multiplies at most four parameters (`nx * ny * nz * nw`): pass a longer product
//! as a parameter of its own.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Grid5 {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn fill5(a: u32, b: u32, c: u32, d: u32, e: u32, data: &mut [f32; a * b * c * d * e]);
        }
        params { n: u32, y: &mut DeviceBuffer<f32> }
        stage run on main {
            launch k::fill5(n, n, n, n, n, y) grid 1 block 256;
        }
    }
}

fn main() {}
