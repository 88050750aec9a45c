// Kernels of the `jacobi` example: one Jacobi sweep of the 2-D Laplace equation with fixed
// (Dirichlet) boundary values, and the reduction of the sweep's residual, the largest change
// of any cell.
//
// tools/build-ptx compiles this file to jacobi.ptx beside it (NVRTC, compute_75).
// The host implementations in examples/src/jacobi/host.rs do the same arithmetic in the same
// order (the `__f*_rn` intrinsics forbid FMA contraction), and a maximum does not depend on
// the order it is taken in, so both backends agree bit for bit, residual included.

extern "C" {

// One sweep over an nx-by-ny row-major grid (index y * nx + x): each interior cell becomes
// the mean of its four neighbours in src; boundary cells keep their value. Each block writes
// the largest |dst - src| of its cells to block_max[block index]. Launch with 32x8 blocks
// covering nx by ny.
__global__ void jacobi_sweep(unsigned int nx, unsigned int ny, const float* __restrict__ src,
                             float* __restrict__ dst, float* __restrict__ block_max) {
    __shared__ float biggest[256];
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned int t = threadIdx.y * blockDim.x + threadIdx.x;
    float change = 0.0f;
    if (x < nx && y < ny) {
        unsigned int i = y * nx + x;
        float c = src[i];
        float v = c;
        if (x > 0 && y > 0 && x + 1 < nx && y + 1 < ny) {
            float sum = __fadd_rn(__fadd_rn(src[i - 1], src[i + 1]),
                                  __fadd_rn(src[i - nx], src[i + nx]));
            v = __fmul_rn(0.25f, sum);
        }
        dst[i] = v;
        change = fabsf(__fsub_rn(v, c));
    }
    biggest[t] = change;
    __syncthreads();
    for (unsigned int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) {
            biggest[t] = fmaxf(biggest[t], biggest[t + stride]);
        }
        __syncthreads();
    }
    if (t == 0) {
        block_max[blockIdx.y * gridDim.x + blockIdx.x] = biggest[0];
    }
}

// out[0] = the largest of partial[0..n). Launch with one block of 256 threads.
__global__ void reduce_max(unsigned int n, const float* __restrict__ partial,
                           float* __restrict__ out) {
    __shared__ float biggest[256];
    unsigned int t = threadIdx.x;
    float m = 0.0f;
    for (unsigned int i = t; i < n; i += blockDim.x) {
        m = fmaxf(m, partial[i]);
    }
    biggest[t] = m;
    __syncthreads();
    for (unsigned int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) {
            biggest[t] = fmaxf(biggest[t], biggest[t + stride]);
        }
        __syncthreads();
    }
    if (t == 0) {
        out[0] = biggest[0];
    }
}

}
