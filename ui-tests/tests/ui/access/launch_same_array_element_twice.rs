//! One constant element of a buffer array passed whole twice to a launch that writes one of
//! them: `xs[0]` aliases itself, as `x, x` does. Pass a separate buffer.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Twice {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { n: u32, xs: &mut [DeviceBuffer<f32>] }
        stage step on main { launch k::saxpy(n, 1.0, xs[0], xs[0]) grid 1u32 block 32u32; }
    }
}

fn main() {}
