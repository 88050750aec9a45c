//! Two ranges of one buffer in one launch whose bounds differ by constants overlap whatever
//! the params are: `x[lo..lo + 4]` and `x[lo + 2..lo + 6]` share `lo + 2..lo + 4`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Shifted {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { lo: usize, x: &mut DeviceBuffer<f32> }
        stage s on main {
            launch k::saxpy(4, 1.0, x[lo..lo + 4], x[lo + 2..lo + 6]) grid 1u32 block 32u32;
        }
    }
}

fn main() {}
