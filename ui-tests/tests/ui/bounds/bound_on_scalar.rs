//! Only buffers have indices to bound: `coeffs: [f32; n]` is an array passed by value, whose
//! length names a parameter. A buffer the kernel reads is `coeffs: &[f32; n]`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Filter {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn filter(n: u32, coeffs: [f32; n], data: &mut [f32; n]);
        }
        params { n: u32, y: &mut DeviceBuffer<f32> }
        stage run on main {
            launch k::filter(n, [0.0; 4], y) grid 1 block 256;
        }
    }
}

fn main() {}
