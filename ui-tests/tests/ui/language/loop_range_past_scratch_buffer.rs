//! A range of a scratch buffer of constant length inside a `for` with constant bounds,
//! evaluated per iteration: with `i = 4`, `t[i * 4..i * 4 + 4]` is `t[16..20]`, past the
//! 16 elements of `t`. Loop over fewer iterations, or declare `t` longer.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline LoopPast {
        streams { main, work[4] }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32> }
        scratch { t: DeviceBuffer<f32> = 16 }
        for i in 0..5 {
            stage clear on work[i % 4] { fill t[i * 4..i * 4 + 4] = 0.0f32; }
        }
    }
}

fn main() {}
