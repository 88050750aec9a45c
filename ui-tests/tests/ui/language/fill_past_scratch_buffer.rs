//! A constant range past the end of a scratch buffer of constant length: `t` holds 16
//! elements, `t[0..17]` ends at 17. Name a range inside it, or declare it longer.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline FillPast {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32> }
        scratch { t: DeviceBuffer<f32> = 16 }
        stage clear on main { fill t[0..17] = 0.0f32; }
    }
}

fn main() {}
