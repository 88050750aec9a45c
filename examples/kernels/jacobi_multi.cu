// Kernels of the `jacobi_multi` example: one Jacobi iteration of the 2-D Laplace equation on a
// block of rows, split the way the step overlaps its halo exchange with its bulk work.
//
// tools/build-ptx compiles this file to jacobi_multi.ptx beside it (NVRTC, compute_75).
// The host implementations in examples/src/jacobi_multi/host.rs do the same arithmetic in the
// same order: the `__f*_rn` intrinsics forbid contracting operations into an FMA, so a cell's
// new value is the same bit for bit on the device, on the host, and whatever the number of
// ranks the grid is split over. Only the residual's sum (a float reduction) depends on order.
//
// A rank's block of rows is five buffers per grid: `halo_top` (the row above, received from
// the neighbour), `top` (its first row), `mid` (`rows` rows), `bot` (its last row) and
// `halo_bot`. Columns 0 and nx-1 are fixed boundary values: no kernel writes them.

extern "C" {

// One row: out[x] = (center[x + 1] + center[x - 1] + below[x] + above[x]) / 4 for
// 0 < x < nx - 1, where `above` and `below` are row `above_row` and row `below_row` of their
// buffers. Launch with nx - 2 threads or more (one per interior column), 1-D.
__global__ void jacobi_edge(unsigned int nx, const float* __restrict__ above,
                            unsigned int above_row, const float* __restrict__ center,
                            const float* __restrict__ below, unsigned int below_row,
                            float* __restrict__ out) {
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x + 1;
    if (x + 1 >= nx) {
        return;
    }
    const float* up = above + (unsigned long long)above_row * nx;
    const float* down = below + (unsigned long long)below_row * nx;
    float sum = __fadd_rn(__fadd_rn(__fadd_rn(center[x + 1], center[x - 1]), down[x]), up[x]);
    out[x] = __fmul_rn(0.25f, sum);
}

// The bulk: the `rows` rows of `mid` into `out` (same layout) and, when `with_norm` is not
// 0, the squared residual (new - old)^2 of every interior cell of the block, `top` and `bot`
// rows included (their new values are computed here again, as `jacobi_edge` computes them,
// but not written), added to norm[0]; with `with_norm` 0, `norm` is not touched. Threads
// cover virtual rows 0 (`top`), 1..rows (`mid`) and rows + 1 (`bot`) and columns 0..nx:
// launch a 2-D grid of at least nx by rows + 2 threads with blocks of up to 1024 threads,
// blockDim.x a multiple of 32. One atomic add per block.
__global__ void jacobi_bulk(unsigned int nx, unsigned int rows, unsigned int with_norm,
                            const float* __restrict__ halo_top, const float* __restrict__ top,
                            const float* __restrict__ mid, const float* __restrict__ bot,
                            const float* __restrict__ halo_bot, float* __restrict__ out,
                            float* __restrict__ norm) {
    __shared__ float warp_sums[32];
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int v = blockIdx.y * blockDim.y + threadIdx.y;
    float residue = 0.0f;
    // Without the residual, the top and bottom rows (virtual rows 0 and rows + 1) have
    // nothing to do.
    bool cell = with_norm != 0 ? v < rows + 2 : v >= 1 && v <= rows;
    if (x >= 1 && x + 1 < nx && cell) {
        const float* center;
        const float* up;
        const float* down;
        if (v == 0) {
            center = top;
            up = halo_top;
            down = mid;
        } else if (v == rows + 1) {
            center = bot;
            up = mid + (unsigned long long)(rows - 1) * nx;
            down = halo_bot;
        } else {
            unsigned int r = v - 1;
            center = mid + (unsigned long long)r * nx;
            up = r == 0 ? top : center - nx;
            down = r + 1 == rows ? bot : center + nx;
        }
        float sum = __fadd_rn(__fadd_rn(__fadd_rn(center[x + 1], center[x - 1]), down[x]), up[x]);
        float value = __fmul_rn(0.25f, sum);
        if (v >= 1 && v <= rows) {
            out[(unsigned long long)(v - 1) * nx + x] = value;
        }
        float diff = __fsub_rn(value, center[x]);
        residue = __fmul_rn(diff, diff);
    }
    if (with_norm == 0) {
        return;
    }
    // The block's sum: each warp's with shuffles, then the warps' in the first warp.
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

// One iteration of one device's block of `rows` rows (one GPU of several driven by one
// process), as NVIDIA's multi_threaded_p2p_opt computes it: every row from `block` (its halos
// `halo_top` and `halo_bot`) into `out`, the first row also into `to_up` (the upper
// neighbour's bottom halo) and the last into `to_down` (the lower neighbour's top halo),
// stored straight into the neighbours' memory where they live on other GPUs; with
// `with_norm` not 0, the block's squared residual added to norm[0]. Threads cover rows
// 0..rows and columns 0..nx: launch a 2-D grid of at least nx by rows threads with blocks of
// up to 1024 threads, blockDim.x a multiple of 32. One atomic add per block.
__global__ void jacobi_peer(unsigned int nx, unsigned int rows, unsigned int with_norm,
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
    if (with_norm == 0) {
        return;
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
