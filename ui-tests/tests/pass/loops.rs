//! Repetition: a stream array sized by a param, a `for` over chunks with `let`s, ranges of
//! one buffer, an array of buffers, a claim per iteration; steps that run ahead; the plan of
//! a step drawn for given params.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Chunked {
        streams { main, copy[lanes], work[lanes](priority = high) }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params {
            lanes: usize,
            chunks: usize,
            input: &PinnedBuffer<f32>,
            x: &mut DeviceBuffer<f32>,
            output: &mut PinnedBuffer<f32>,
            partials: &mut [DeviceBuffer<f32>],
        }
        for i in 0..chunks {
            let size = x.len().div_ceil(chunks);
            let lo = (i * size).min(x.len());
            let hi = (lo + size).min(x.len());
            stage load on copy[i % lanes] { copy input[lo..hi] -> x[lo..hi]; }
            stage compute on work[i % lanes] {
                launch k::add_scalar((hi - lo) as u32, 1.0, x[lo..hi]) grid 1u32 block 256u32;
                launch k::saxpy((hi - lo) as u32, 2.0, x[lo..hi], partials[i % 2][..hi - lo]) grid 1u32 block 256u32;
            }
            stage store on copy[i % lanes] { copy x[lo..hi] -> output[lo..hi]; }
        }
        stage tail on main { fill x[..4] = 0.0; }
    }
}

fn chunks(ctx: &Context, input: &PinnedBuffer<f32>, x: &mut DeviceBuffer<f32>, output: &mut PinnedBuffer<f32>, partials: &mut [DeviceBuffer<f32>]) -> Result<String> {
    let mut pipeline = Chunked::new(ctx)?;
    pipeline.run_ahead(ChunkedParams { lanes: 4, chunks: 16, input, x: &mut *x, output: &mut *output, partials: &mut *partials }, 8)?.wait()?;
    pipeline.run_steps(ChunkedParams { lanes: 2, chunks: 3, input, x: &mut *x, output: &mut *output, partials: &mut *partials }, 2)?.wait()?;
    let _ = (pipeline.copy_streams().len(), pipeline.main_stream());
    pipeline.plan_dot(&ChunkedParams { lanes: 4, chunks: 16, input, x, output, partials })
}

fn main() {
    let _ = chunks;
}
