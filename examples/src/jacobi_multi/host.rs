//! CPU implementations of the `jacobi_multi` kernels (`examples/kernels/jacobi_multi.cu`),
//! which the CPU backend runs: the same arithmetic in the same order, so every cell agrees
//! with the GPU bit for bit. Only the residual's sum is added in another order.

/// One cell's new value from its four neighbours, as the kernels compute it:
/// `((right + left) + down) + up`, times a quarter, each operation rounded on its own.
pub fn cell(left: f32, right: f32, up: f32, down: f32) -> f32 {
    0.25 * (((right + left) + down) + up)
}

/// One row's update from its neighbour rows: the new values into `out` when given, and the
/// sum of the squared residuals, added cell by cell in column order.
pub fn row_update(center: &[f32], up: &[f32], down: &[f32], mut out: Option<&mut [f32]>) -> f32 {
    let mut residual = 0.0f32;
    for x in 1..center.len().saturating_sub(1) {
        let value = cell(center[x - 1], center[x + 1], up[x], down[x]);
        if let Some(out) = out.as_deref_mut() {
            out[x] = value;
        }
        let diff = value - center[x];
        residual += diff * diff;
    }
    residual
}

/// The rows `0..rows` of `block` into `out` (the row above the first is `above`, the row
/// below the last `below`), as the kernels' shared sweep computes them; returns their squared
/// residual.
fn sweep_rows(
    nx: usize,
    rows: usize,
    above: &[f32],
    block: &[f32],
    below: &[f32],
    out: &mut [f32],
) -> f32 {
    let row = |r: usize| &block[r * nx..(r + 1) * nx];
    let mut residual = 0.0f32;
    for (r, out) in out.chunks_exact_mut(nx).take(rows).enumerate() {
        let up = if r == 0 { &above[..nx] } else { row(r - 1) };
        let down = if r + 1 == rows {
            &below[..nx]
        } else {
            row(r + 1)
        };
        residual += row_update(row(r), up, down, Some(out));
    }
    residual
}

/// `jacobi_edges`: the block's first row `top` (between `halo_top` and `mid`'s first row) into
/// `out_top`, its last row `bot` (between `mid`'s row `rows - 1` and `halo_bot`) into
/// `out_bot`, and the two rows' squared residual added to `norm[0]`.
#[allow(clippy::too_many_arguments)]
pub fn jacobi_edges(
    nx: u32,
    rows: u32,
    halo_top: &[f32],
    top: &[f32],
    mid: &[f32],
    bot: &[f32],
    halo_bot: &[f32],
    out_top: &mut [f32],
    out_bot: &mut [f32],
    norm: &mut [f32],
) {
    let (nx, rows) = (nx as usize, rows as usize);
    let first = row_update(&top[..nx], &halo_top[..nx], &mid[..nx], Some(out_top));
    let above_bot = &mid[(rows - 1) * nx..rows * nx];
    let last = row_update(&bot[..nx], above_bot, &halo_bot[..nx], Some(out_bot));
    norm[0] += first + last;
}

/// `jacobi_mid`: the `rows` rows of `mid` (between `top` and `bot`) into `out`, and their
/// squared residual added to `norm[0]`.
pub fn jacobi_mid(
    nx: u32,
    rows: u32,
    top: &[f32],
    mid: &[f32],
    bot: &[f32],
    out: &mut [f32],
    norm: &mut [f32],
) {
    norm[0] += sweep_rows(nx as usize, rows as usize, top, mid, bot, out);
}

/// `jacobi_peer`: the `rows` rows of `block` (its halos `halo_top` and `halo_bot`) into
/// `out`, the first row also into `to_up` and the last into `to_down` (the neighbours'
/// halos), and the block's squared residual added to `norm[0]`.
#[allow(clippy::too_many_arguments)]
pub fn jacobi_peer(
    nx: u32,
    rows: u32,
    halo_top: &[f32],
    block: &[f32],
    halo_bot: &[f32],
    out: &mut [f32],
    to_up: &mut [f32],
    to_down: &mut [f32],
    norm: &mut [f32],
) {
    let (nx, rows) = (nx as usize, rows as usize);
    let residual = sweep_rows(nx, rows, halo_top, block, halo_bot, out);
    // The edge rows, as the kernel stores them beside `out`.
    let interior = 1..nx.saturating_sub(1);
    to_up[interior.clone()].copy_from_slice(&out[interior.clone()]);
    let last = (rows - 1) * nx;
    to_down[interior.clone()].copy_from_slice(&out[last + interior.start..last + interior.end]);
    norm[0] += residual;
}
