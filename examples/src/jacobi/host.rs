//! CPU implementations of `examples/kernels/jacobi.cu`: what the CPU backend runs for one
//! launch, over the whole slices. The same arithmetic in the same order as the CUDA C, and a
//! maximum does not depend on the order it is taken in, so both backends agree bit for bit.

/// The block the kernel is launched with: 32 by 8 threads.
pub const BLOCK: (u32, u32) = (32, 8);

/// The number of blocks of a launch over an `nx` by `ny` grid: one partial maximum each.
pub fn blocks(nx: u32, ny: u32) -> usize {
    nx.div_ceil(BLOCK.0) as usize * ny.div_ceil(BLOCK.1) as usize
}

/// The new value of cell `(x, y)`: the mean of its four neighbours inside, itself on the
/// boundary.
#[inline]
pub fn cell(src: &[f32], nx: usize, ny: usize, x: usize, y: usize) -> f32 {
    let i = y * nx + x;
    if x == 0 || y == 0 || x + 1 == nx || y + 1 == ny {
        return src[i];
    }
    let sum = (src[i - 1] + src[i + 1]) + (src[i - nx] + src[i + nx]);
    0.25 * sum
}

/// `jacobi_sweep(nx, ny, src, dst, block_max)`: one sweep, and each 32x8 block's largest
/// change (the kernel's contract: launched with 32x8 blocks covering the grid).
pub fn jacobi_sweep(nx: u32, ny: u32, src: &[f32], dst: &mut [f32], block_max: &mut [f32]) {
    let (nx, ny) = (nx as usize, ny as usize);
    let (bx, by) = (BLOCK.0 as usize, BLOCK.1 as usize);
    let grid_x = nx.div_ceil(bx);
    for y in 0..ny {
        for x in 0..nx {
            let i = y * nx + x;
            let v = cell(src, nx, ny, x, y);
            dst[i] = v;
            let change = (v - src[i]).abs();
            let block = &mut block_max[(y / by) * grid_x + x / bx];
            // The first cell of a block sets it; the others raise it.
            if x % bx == 0 && y % by == 0 {
                *block = change;
            } else {
                *block = block.max(change);
            }
        }
    }
}

/// `reduce_max(n, partial, out)`: `out[0]` = the largest of `partial[..n]` (0 for none).
pub fn reduce_max(n: u32, partial: &[f32], out: &mut [f32]) {
    out[0] = partial[..n as usize].iter().fold(0.0f32, |m, &v| m.max(v));
}
