//! A launch passes one buffer twice only as two ranges (checked apart before the step is
//! enqueued); the whole buffer next to a range of it, written, always overlaps.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline One {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params { x: &mut DeviceBuffer<f32> }
        stage step on main { launch k::saxpy(8, 2.0, x, x[8..16]) grid 1u32 block 32u32; }
    }
}

fn main() {}
