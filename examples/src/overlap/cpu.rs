//! CPU implementation of `examples/kernels/overlap.cu`: what the CPU backend runs for one
//! launch, over the whole slices. The same arithmetic as the CUDA C (no FMA contraction
//! there), so both backends produce the same bits.

/// `transform(n, iters, a, input, output)`: `y = x`, then `iters` times `y = y * a + x`.
pub fn transform(n: u32, iters: u32, a: f32, input: &[f32], output: &mut [f32]) {
    for (y, &x) in output[..n as usize].iter_mut().zip(&input[..n as usize]) {
        *y = element(x, iters, a);
    }
}

/// One element of `transform`: one thread of the kernel.
#[inline]
pub fn element(x: f32, iters: u32, a: f32) -> f32 {
    let mut y = x;
    for _ in 0..iters {
        y = y * a + x;
    }
    y
}
