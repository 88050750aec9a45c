//! CPU implementation of `examples/kernels/heat2d.cu`: what the CPU backend runs for one
//! launch, over the whole slices. Same arithmetic in the same order as the CUDA C (which
//! forbids FMA contraction), so both backends produce the same bits.

/// `heat_step(nx, ny, alpha, src, dst)`: `dst = src + alpha * laplacian(src)` with insulated
/// walls (a neighbour outside the grid reads as the cell itself).
pub fn heat_step(nx: u32, ny: u32, alpha: f32, src: &[f32], dst: &mut [f32]) {
    let (nx, ny) = (nx as usize, ny as usize);
    for y in 0..ny {
        for x in 0..nx {
            let i = y * nx + x;
            dst[i] = cell(src, nx, ny, x, y, alpha);
        }
    }
}

/// The new value of cell `(x, y)`: one thread of the kernel.
#[inline]
pub fn cell(src: &[f32], nx: usize, ny: usize, x: usize, y: usize, alpha: f32) -> f32 {
    let i = y * nx + x;
    let c = src[i];
    let l = if x > 0 { src[i - 1] } else { c };
    let r = if x + 1 < nx { src[i + 1] } else { c };
    let d = if y > 0 { src[i - nx] } else { c };
    let u = if y + 1 < ny { src[i + nx] } else { c };
    let sum = (l + r) + (d + u);
    let lap = sum - 4.0 * c;
    c + alpha * lap
}

/// `sample(nx, ny, stride, mx, my, src, dst)`: every `stride`-th cell of every `stride`-th
/// row of `src` into the `mx` by `my` grid `dst` (see [`preview_size`]; a smaller grid crops
/// the preview, and `stride` 0 samples nothing, as in the kernel).
pub fn sample(nx: u32, ny: u32, stride: u32, mx: u32, my: u32, src: &[f32], dst: &mut [f32]) {
    if stride == 0 {
        return;
    }
    let (full_x, full_y) = preview_size(nx, ny, stride);
    let (w, h) = (mx.min(full_x) as usize, my.min(full_y) as usize);
    let (nx, stride, mx) = (nx as usize, stride as usize, mx as usize);
    for py in 0..h {
        for px in 0..w {
            dst[py * mx + px] = src[py * stride * nx + px * stride];
        }
    }
}

/// The preview's width and height: `ceil(nx / stride)` by `ceil(ny / stride)`.
pub fn preview_size(nx: u32, ny: u32, stride: u32) -> (u32, u32) {
    (nx.div_ceil(stride), ny.div_ceil(stride))
}
