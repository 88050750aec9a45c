//! One statement may name two ranges of one buffer where one is written when they are apart:
//! a periodic boundary copied within one buffer, a kernel given two halves of one buffer, and
//! two ranges of one element of a buffer array.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Periodic {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { a: f32, lo: usize, f: &mut DeviceBuffer<f32>, xs: &mut [DeviceBuffer<f32>] }
        stage wrap on main { copy f[0..4] -> f[8..12]; }
        stage halves on main { launch k::saxpy(2, a, f[lo..lo + 2], f[4..6]) grid 1u32 block 32u32; }
        stage element on main { copy xs[0][0..2] -> xs[0][2..4]; }
    }
}

fn step(ctx: &Context, f: &mut DeviceBuffer<f32>, xs: &mut [DeviceBuffer<f32>]) -> Result<()> {
    let mut pipeline = Periodic::new(ctx)?;
    pipeline.run(PeriodicParams { a: 1.0, lo: 0, f, xs })?.wait()
}

fn main() {
    let _ = step;
}
