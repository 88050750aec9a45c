//! A range open at its end that starts past the end of a scratch buffer of constant length:
//! `t[17..]` of a 16-element `t` (`t[16..]`, empty, is inside). Start it inside.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline StartPast {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32> }
        scratch { t: DeviceBuffer<f32> = 16 }
        stage clear on main { fill t[17..] = 0.0f32; }
    }
}

fn main() {}
