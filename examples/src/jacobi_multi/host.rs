//! CPU implementations of the `jacobi_multi` kernels (`examples/kernels/jacobi_multi.cu`),
//! which the CPU backend runs: the same arithmetic in the same order, so every cell agrees
//! with the GPU bit for bit. Only the residual's sum is added in another order.

/// One cell's new value from its four neighbours, as the kernels compute it:
/// `((right + left) + down) + up`, times a quarter, each operation rounded on its own.
pub fn cell(left: f32, right: f32, up: f32, down: f32) -> f32 {
    0.25 * (((right + left) + down) + up)
}

/// `jacobi_edge`: one row of `center` into `out`, its neighbours row `above_row` of `above`
/// and row `below_row` of `below`; the boundary columns are left alone.
pub fn jacobi_edge(
    nx: u32,
    above: &[f32],
    above_row: u32,
    center: &[f32],
    below: &[f32],
    below_row: u32,
    out: &mut [f32],
) {
    let nx = nx as usize;
    let up = &above[above_row as usize * nx..][..nx];
    let down = &below[below_row as usize * nx..][..nx];
    for x in 1..nx.saturating_sub(1) {
        out[x] = cell(center[x - 1], center[x + 1], up[x], down[x]);
    }
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

/// `jacobi_bulk`: the `rows` rows of `mid` into `out`, and the squared residual of every
/// interior cell of the block (`top` and `bot` too) added to `norm[0]`.
#[allow(clippy::too_many_arguments)]
pub fn jacobi_bulk(
    nx: u32,
    rows: u32,
    halo_top: &[f32],
    top: &[f32],
    mid: &[f32],
    bot: &[f32],
    halo_bot: &[f32],
    out: &mut [f32],
    norm: &mut [f32],
) {
    let (nx, rows) = (nx as usize, rows as usize);
    let row = |r: usize| &mid[r * nx..(r + 1) * nx];
    let (top, bot) = (&top[..nx], &bot[..nx]);
    let mut residual = row_update(top, &halo_top[..nx], row(0), None);
    for (r, out) in out.chunks_exact_mut(nx).take(rows).enumerate() {
        let up = if r == 0 { top } else { row(r - 1) };
        let down = if r + 1 == rows { bot } else { row(r + 1) };
        residual += row_update(row(r), up, down, Some(out));
    }
    residual += row_update(bot, row(rows - 1), &halo_bot[..nx], None);
    norm[0] += residual;
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
    let row = |r: usize| &block[r * nx..(r + 1) * nx];
    let mut residual = 0.0f32;
    for (r, out) in out.chunks_exact_mut(nx).take(rows).enumerate() {
        let up = if r == 0 { &halo_top[..nx] } else { row(r - 1) };
        let down = if r + 1 == rows {
            &halo_bot[..nx]
        } else {
            row(r + 1)
        };
        residual += row_update(row(r), up, down, Some(out));
    }
    // The edge rows, as the kernel stores them beside `out`.
    let interior = 1..nx.saturating_sub(1);
    to_up[interior.clone()].copy_from_slice(&out[interior.clone()]);
    let last = (rows - 1) * nx;
    to_down[interior.clone()].copy_from_slice(&out[last + interior.start..last + interior.end]);
    norm[0] += residual;
}
