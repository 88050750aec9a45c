//! A window shorter than the kernel's bound, both from literals: a constant range, and a whole
//! scratch buffer of constant length (issue 23, class 2). Refused only when the step ran before.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Short {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = 64 }
        stage range on main { launch k::saxpy(256, 2.0, x[0..128], y) grid 1u32 block 256u32; }
        stage whole on main { launch k::add_scalar(100, 1.0, tmp) grid 1u32 block 128u32; }
    }
}

fn main() {}
