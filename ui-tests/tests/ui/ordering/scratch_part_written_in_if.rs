//! A scratch buffer written at `tmp[0..8]`, and at `tmp[8..16]` only inside an `if` without
//! `else`: a step whose condition is false reads undefined `tmp[8..16]`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Parts {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { residual: &DeviceBuffer<f32>, out: &mut DeviceBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = 16 }
        stage s on main {
            fill tmp[0..8] = 0.0;
            if residual > 0.5f32 {
                fill tmp[8..16] = 1.0;
            }
            launch k::saxpy(8, 1.0, tmp[8..16], out) grid 1u32 block 8u32;
        }
    }
}

fn main() {}
