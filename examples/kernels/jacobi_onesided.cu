// Kernel of `jacobi_multi --exchange onesided` (examples/src/jacobi_multi/onesided.rs): one
// Jacobi iteration of one rank's block of rows, its edge rows stored straight into the
// neighbours' halo windows (memory other processes exported to this one, mapped over NVLink).
//
// tools/build-ptx compiles this file to jacobi_onesided.ptx beside it (NVRTC, compute_75).
// The `__f*_rn` intrinsics forbid contracting operations into an FMA, so a cell's new value is
// the one the other exchanges' kernels and the CPU implementation in onesided.rs compute, bit
// for bit.

extern "C" {

// Every row of `block` (`rows` rows of `nx`, its halos `halo_top` and `halo_bot`) into `out`,
// the first row also into `to_up` (the upper neighbour's bottom halo) and the last into
// `to_down` (the lower neighbour's top halo); the block's squared residual (new - old)^2 of
// every interior cell added to norm[0]. Columns 0 and nx - 1 are fixed: not written. Threads
// cover rows 0..rows and columns 0..nx: launch a 2-D grid of at least nx by rows threads with
// blocks of up to 1024 threads, blockDim.x a multiple of 32. One atomic add per block.
__global__ void jacobi_window(unsigned int nx, unsigned int rows,
                              const float* __restrict__ halo_top, const float* __restrict__ block,
                              const float* __restrict__ halo_bot, float* __restrict__ out,
                              float* __restrict__ to_up, float* __restrict__ to_down,
                              float* __restrict__ norm) {
    __shared__ float warp_sums[32];
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int r = blockIdx.y * blockDim.y + threadIdx.y;
    float residue = 0.0f;
    if (x >= 1 && x + 1 < nx && r < rows) {
        const float* center = block + (unsigned long long)r * nx;
        const float* up = r == 0 ? halo_top : center - nx;
        const float* down = r + 1 == rows ? halo_bot : center + nx;
        float sum = __fadd_rn(__fadd_rn(__fadd_rn(center[x + 1], center[x - 1]), down[x]), up[x]);
        float value = __fmul_rn(0.25f, sum);
        out[(unsigned long long)r * nx + x] = value;
        if (r == 0) {
            to_up[x] = value;
        }
        if (r + 1 == rows) {
            to_down[x] = value;
        }
        float diff = __fsub_rn(value, center[x]);
        residue = __fmul_rn(diff, diff);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        residue += __shfl_down_sync(0xffffffffu, residue, offset);
    }
    unsigned int tid = threadIdx.y * blockDim.x + threadIdx.x;
    unsigned int lane = tid & 31u;
    unsigned int warp = tid >> 5;
    if (lane == 0) {
        warp_sums[warp] = residue;
    }
    __syncthreads();
    if (warp == 0) {
        unsigned int warps = (blockDim.x * blockDim.y + 31u) / 32u;
        residue = lane < warps ? warp_sums[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            residue += __shfl_down_sync(0xffffffffu, residue, offset);
        }
        if (lane == 0) {
            atomicAdd(norm, residue);
        }
    }
}

}  // extern "C"
