//! The constant rules on `const` items, which the macro cannot see but the compiler can: a
//! window shorter than a bound, a copy between ranges of different lengths, `step % K` that
//! never holds, a stream index past its array (issue 23, class 2). Each is an error on the
//! user's tokens when the program compiles.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

const HALF: usize = 128;
const N: u32 = 256;
const EVERY: u32 = 0;
const LANES: usize = 2;

gpu_pipeline! {
    pub pipeline Consts {
        streams { main, work[LANES] }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, h: &mut PinnedBuffer<f32> }
        stage short on main { launch k::saxpy(N, 2.0, x[0..HALF], y) grid 1u32 block 256u32; }
        stage lengths on work[LANES] { copy y[0..HALF] -> h[0..HALF + 1]; }
        stage every on main { if step % EVERY == 0 { fill x = 0.0; } }
    }
}

fn main() {}
