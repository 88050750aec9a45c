//! `partials` is written in every case of a `switch`: a value past the last case runs none, and `finish` reads it: its contents may still be undefined.
//! Write it on every path: both bodies of an `if`/`else`, a `do ... while`, or before
//! the conditional.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Reduce {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { m: u32, flag: &DeviceBuffer<u32>, r: &mut DeviceBuffer<f32>, out: &mut DeviceBuffer<f32> }
        scratch { partials: DeviceBuffer<f32> = m as usize }
        stage prepare on main {
            switch flag { 0 => { fill partials = 0.0f32; } 1 => { fill partials = 1.0f32; } }
        }
        stage finish on main {
            launch k::saxpy(m, 1.0, partials, out) grid 1 block 256;
        }
    }
}

fn main() {}
