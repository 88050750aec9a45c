// Kernels of the `cg` example: conjugate gradient on the 2-D Poisson matrix (the 5-point
// Laplacian of an nx-by-ny grid with zero Dirichlet boundaries), in double precision.
//
// tools/build-ptx compiles this file to cg.ptx beside it (NVRTC, compute_75).
// The host implementations in examples/src/cg/host.rs do the same arithmetic in the same order
// (the `__d*_rn` intrinsics forbid FMA contraction) except for the dot products' sums: a block
// sums its threads' products as a tree and the blocks meet in an atomic add, in no fixed order,
// so the backends agree to rounding, not bit for bit.

extern "C" {

// ap = A p: 4 p[i] minus the four neighbours inside the grid (row-major, index y * nx + x).
// Launch a 2-D grid covering nx by ny.
__global__ void poisson_apply(unsigned int nx, unsigned int ny, const double* __restrict__ p,
                              double* __restrict__ ap) {
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) {
        return;
    }
    unsigned int i = y * nx + x;
    double v = __dmul_rn(4.0, p[i]);
    if (x > 0) {
        v = __dsub_rn(v, p[i - 1]);
    }
    if (x + 1 < nx) {
        v = __dsub_rn(v, p[i + 1]);
    }
    if (y > 0) {
        v = __dsub_rn(v, p[i - nx]);
    }
    if (y + 1 < ny) {
        v = __dsub_rn(v, p[i + nx]);
    }
    ap[i] = v;
}

// out[0] += a . b over n elements. Launch 1-D blocks of 256 threads, any number of blocks (each
// thread strides over the grid); one atomic add per block.
__global__ void dot(unsigned int n, const double* __restrict__ a, const double* __restrict__ b,
                    double* __restrict__ out) {
    __shared__ double partial[256];
    unsigned int t = threadIdx.x;
    double sum = 0.0;
    for (unsigned int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) {
        sum = __dadd_rn(sum, __dmul_rn(a[i], b[i]));
    }
    partial[t] = sum;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            partial[t] = __dadd_rn(partial[t], partial[t + s]);
        }
        __syncthreads();
    }
    if (t == 0) {
        atomicAdd(out, partial[0]);
    }
}

// alpha = rr / pap (both computed on the device); x += alpha p; r -= alpha ap. One thread per
// element, 1-D.
__global__ void update_xr(unsigned int n, const double* __restrict__ rr,
                          const double* __restrict__ pap, const double* __restrict__ p,
                          const double* __restrict__ ap, double* __restrict__ x,
                          double* __restrict__ r) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    double alpha = __ddiv_rn(rr[0], pap[0]);
    x[i] = __dadd_rn(x[i], __dmul_rn(alpha, p[i]));
    r[i] = __dsub_rn(r[i], __dmul_rn(alpha, ap[i]));
}

// beta = rr_new / rr; p = r + beta p. One thread per element, 1-D.
__global__ void update_p(unsigned int n, const double* __restrict__ rr,
                         const double* __restrict__ rr_new, const double* __restrict__ r,
                         double* __restrict__ p) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    double beta = __ddiv_rn(rr_new[0], rr[0]);
    p[i] = __dadd_rn(r[i], __dmul_rn(beta, p[i]));
}

}  // extern "C"
