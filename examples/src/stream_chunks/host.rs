//! CPU implementation of `examples/kernels/stream_chunks.cu`: what the CPU backend runs for
//! one launch. The same arithmetic as the CUDA C (no FMA contraction there), so both
//! backends produce the same bits.

/// `transform(n, iters, a, x)`: each of the first `n` elements through [`element`].
pub fn transform(n: u32, iters: u32, a: f32, x: &mut [f32]) {
    for v in &mut x[..n as usize] {
        *v = element(*v, iters, a);
    }
}

/// One element: `iters` times `v = v * a + 1`. One thread of the kernel.
#[inline]
pub fn element(mut v: f32, iters: u32, a: f32) -> f32 {
    for _ in 0..iters {
        v = v * a + 1.0;
    }
    v
}
