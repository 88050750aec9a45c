//! CPU implementation of `examples/kernels/halo.cu`: what the CPU backend runs for one
//! launch. The same arithmetic in the same order as the CUDA C (no FMA contraction), so both
//! backends agree bit for bit.

/// `stencil_rows(nx, rows, alpha, src, dst)`: `src` holds `rows + 2` rows (one above and one
/// below the band), `dst` the band's `rows` rows.
pub fn stencil_rows(nx: u32, rows: u32, alpha: f32, src: &[f32], dst: &mut [f32]) {
    let nx = nx as usize;
    for r in 0..rows as usize {
        for x in 0..nx {
            dst[r * nx + x] = cell(src, nx, r + 1, x, alpha);
        }
    }
}

/// The new value of cell `(x, y)` of `src` (which has a row above and below `y`), with
/// insulated left and right walls.
#[inline]
pub fn cell(src: &[f32], nx: usize, y: usize, x: usize, alpha: f32) -> f32 {
    let i = y * nx + x;
    let c = src[i];
    let l = if x > 0 { src[i - 1] } else { c };
    let r = if x + 1 < nx { src[i + 1] } else { c };
    let u = src[i - nx];
    let d = src[i + nx];
    let sum = (l + r) + (u + d);
    let lap = sum - 4.0 * c;
    c + alpha * lap
}
