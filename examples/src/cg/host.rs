//! CPU implementations of `examples/kernels/cg.cu`, what the CPU backend runs for one launch
//! over the whole slices, and the plain CPU solver the example checks against. The element-wise
//! arithmetic is the kernels' own, operation for operation; the dot products sum in index order
//! here and as a tree plus atomic adds on a GPU, so the backends agree to rounding.

/// The 5-point Laplacian of cell `i = y * nx + x` applied to `p`: `4 p[i]` minus its neighbours
/// inside the grid.
#[inline]
fn apply_at(p: &[f64], nx: usize, ny: usize, x: usize, y: usize) -> f64 {
    let i = y * nx + x;
    let mut v = 4.0 * p[i];
    if x > 0 {
        v -= p[i - 1];
    }
    if x + 1 < nx {
        v -= p[i + 1];
    }
    if y > 0 {
        v -= p[i - nx];
    }
    if y + 1 < ny {
        v -= p[i + nx];
    }
    v
}

/// `poisson_apply(nx, ny, p, ap)`: `ap = A p`.
pub fn poisson_apply(nx: u32, ny: u32, p: &[f64], ap: &mut [f64]) {
    let (nx, ny) = (nx as usize, ny as usize);
    for y in 0..ny {
        for x in 0..nx {
            ap[y * nx + x] = apply_at(p, nx, ny, x, y);
        }
    }
}

/// `dot(n, a, b, out)`: `out[0] += a . b` over the first `n` elements.
pub fn dot(n: u32, a: &[f64], b: &[f64], out: &mut [f64]) {
    let n = n as usize;
    out[0] += a[..n].iter().zip(&b[..n]).map(|(a, b)| a * b).sum::<f64>();
}

/// `update_xr(n, rr, pap, p, ap, x, r)`: `alpha = rr / pap`, `x += alpha p`, `r -= alpha ap`.
pub fn update_xr(
    n: u32,
    rr: &[f64],
    pap: &[f64],
    p: &[f64],
    ap: &[f64],
    x: &mut [f64],
    r: &mut [f64],
) {
    let alpha = rr[0] / pap[0];
    for i in 0..n as usize {
        x[i] += alpha * p[i];
        r[i] -= alpha * ap[i];
    }
}

/// `update_p(n, rr, rr_new, r, p)`: `beta = rr_new / rr`, `p = r + beta p`.
pub fn update_p(n: u32, rr: &[f64], rr_new: &[f64], r: &[f64], p: &mut [f64]) {
    let beta = rr_new[0] / rr[0];
    for i in 0..n as usize {
        p[i] = r[i] + beta * p[i];
    }
}

/// `|b - A x| / |b|`, the true relative residual of `x` (not the solver's recurrence).
pub fn relative_residual(nx: u32, ny: u32, b: &[f64], x: &[f64]) -> f64 {
    let (w, h) = (nx as usize, ny as usize);
    let mut r2 = 0.0;
    let mut b2 = 0.0;
    for y in 0..h {
        for x_ in 0..w {
            let i = y * w + x_;
            let d = b[i] - apply_at(x, w, h, x_, y);
            r2 += d * d;
            b2 += b[i] * b[i];
        }
    }
    (r2 / b2).sqrt()
}

/// The plain solver: conjugate gradient from `x = 0` while `r . r > tol2`, at most
/// `max_iterations` iterations, with the kernels' arithmetic in the same order. Returns `x`
/// and the iterations made.
pub fn solve(nx: u32, ny: u32, b: &[f64], tol2: f64, max_iterations: u32) -> (Vec<f64>, u32) {
    let len = nx * ny;
    let n = len as usize;
    let mut x = vec![0.0; n];
    let mut r = b.to_vec();
    let mut p = b.to_vec();
    let mut ap = vec![0.0; n];
    let mut rr = [0.0];
    dot(len, &r, &r, &mut rr);
    let mut iterations = 0;
    while rr[0] > tol2 && iterations < max_iterations {
        poisson_apply(nx, ny, &p, &mut ap);
        let mut pap = [0.0];
        dot(len, &p, &ap, &mut pap);
        update_xr(len, &rr, &pap, &p, &ap, &mut x, &mut r);
        let mut rr_new = [0.0];
        dot(len, &r, &r, &mut rr_new);
        update_p(len, &rr, &rr_new, &r, &mut p);
        rr = rr_new;
        iterations += 1;
    }
    (x, iterations)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a 1 x 1 grid A is 4: one iteration solves `4 x = b` exactly.
    #[test]
    fn one_cell_is_solved_in_one_iteration() {
        let (x, iterations) = solve(1, 1, &[2.0], 1e-30, 10);
        assert_eq!(x, vec![0.5]);
        assert_eq!(iterations, 1);
    }

    /// CG on n unknowns converges in at most n iterations (in exact arithmetic; a few more
    /// in floating point), and its answer satisfies A x = b.
    #[test]
    fn a_small_grid_converges_and_satisfies_the_equation() {
        let (nx, ny) = (5, 4);
        let b: Vec<f64> = (0..20).map(|i| f64::from(i % 7) - 2.5).collect();
        let bb: f64 = b.iter().map(|v| v * v).sum();
        let (x, iterations) = solve(nx, ny, &b, 1e-24 * bb, 100);
        assert!(iterations <= 25, "{iterations}");
        assert!(relative_residual(nx, ny, &b, &x) < 1e-11);
    }
}
