//! A copy from a whole scratch buffer of constant length into a constant range of another
//! length: `t` holds 16 elements, `x[0..32]` 32. Make the lengths one.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline CopyLengths {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32> }
        scratch { t: DeviceBuffer<f32> = 16 }
        stage save on main { fill t = 0.0f32; copy t -> x[0..32]; }
    }
}

fn main() {}
