//! A scratch buffer starts with undefined contents (and a replay finds what the last step
//! left): `partials` is read by `finish` before anything writes it. Write it first, or make
//! it a param if it keeps state from step to step.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Reduce {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, m: u32, out: &mut DeviceBuffer<f32> }
        scratch { partials: DeviceBuffer<f32> = m as usize }
        stage finish on main {
            launch k::saxpy(m, 1.0, partials, out) grid 1 block 256;
        }
    }
}

fn main() {}
