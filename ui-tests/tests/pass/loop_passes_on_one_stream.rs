//! Two passes over each chunk, the passes of a chunk on one stream of a stream array sized by
//! a param: `(i / 2) % lanes` is one stream for `i = 0` and `i = 1`, which run in the order
//! written, so both may write the chunk.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Passes {
        streams { main, work[lanes] }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { lanes: usize, x: &mut DeviceBuffer<f32> }
        for i in 0..8 {
            let chunk = i / 2;
            stage pass on work[chunk % lanes] {
                launch k::add_scalar(4, 1.0, x[chunk * 4..chunk * 4 + 4]) grid 1u32 block 32u32;
            }
        }
    }
}

fn step(ctx: &Context, x: &mut DeviceBuffer<f32>) -> Result<()> {
    Passes::new(ctx)?.run(PassesParams { lanes: 2, x })?.wait()
}

fn main() {
    let _ = step;
}
