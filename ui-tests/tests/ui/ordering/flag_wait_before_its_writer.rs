//! A `wait` that only a later-ordered write can satisfy waits for ever. Here `finish` comes
//! first in program order, so `part` (which writes `done` and reads `partial` after `finish`
//! reads it) runs after it. Write the flag in a stage the waiting one runs after.

use gpu_pipeline::{DeviceBuffer, FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Reduce {
        streams { produce, consume }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, x: &DeviceBuffer<f32>, partial: &mut DeviceBuffer<f32>, done: &mut FlagCell }
        stage finish on consume {
            wait done >= 1;
            launch k::add_scalar(n, 1.0, partial) grid n.div_ceil(256) block 256;
        }
        stage part on produce {
            launch k::saxpy(n, 1.0, x, partial) grid n.div_ceil(256) block 256;
            write done = 1;
        }
    }
}

fn main() {}
