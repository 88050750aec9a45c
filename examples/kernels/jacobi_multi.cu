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
//
// Two choices in `jacobi_bulk` and `jacobi_peer` are measured, not style
// (benches/multi_gpu/kernel_speed.cu on one H200, docs/PERFORMANCE.md): row offsets are
// 32-bit, so a buffer holds fewer than 2^31 elements (the example refuses bigger blocks), and
// thread 0 of block 0 is column 1, as in NVIDIA's kernel. With 64-bit offsets and thread 0 on
// column 0 (which has nothing to do), `jacobi_peer` took 1.024x the time of a kernel written as
// NVIDIA's at every size; now 0.998x.

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

// The block's squared residual `residue` (one value per thread) added to norm[0]: each warp's
// sum with shuffles, then the warps' in the first warp, then one atomic add per block.
__device__ void add_block_residue(float residue, float* __restrict__ norm) {
    __shared__ float warp_sums[32];
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

// The bulk: the `rows` rows of `mid` into `out` (same layout) and the squared residual
// (new - old)^2 of every interior cell of the block, `top` and `bot` rows included (their new
// values are computed here again, as `jacobi_edge` computes them, but not written), added to
// norm[0]. Threads cover virtual rows 0 (`top`), 1..rows (`mid`) and rows + 1 (`bot`) and
// columns 1..nx-1: launch a 2-D grid of at least nx - 2 by rows + 2 threads (thread x is column
// x + 1) with blocks of up to 1024 threads, blockDim.x a multiple of 32. One atomic add per
// block. `mid` and `out` hold fewer than 2^31 elements.
__global__ void jacobi_bulk(unsigned int nx, unsigned int rows,
                            const float* __restrict__ halo_top, const float* __restrict__ top,
                            const float* __restrict__ mid, const float* __restrict__ bot,
                            const float* __restrict__ halo_bot, float* __restrict__ out,
                            float* __restrict__ norm) {
    int x = blockIdx.x * blockDim.x + threadIdx.x + 1;
    int v = blockIdx.y * blockDim.y + threadIdx.y;
    float residue = 0.0f;
    if (x + 1 < (int)nx && v < (int)rows + 2) {
        const float* center;
        const float* up;
        const float* down;
        if (v == 0) {
            center = top;
            up = halo_top;
            down = mid;
        } else if (v == (int)rows + 1) {
            center = bot;
            up = mid + ((int)rows - 1) * (int)nx;
            down = halo_bot;
        } else {
            int r = v - 1;
            center = mid + r * (int)nx;
            up = r == 0 ? top : center - nx;
            down = r + 1 == (int)rows ? bot : center + nx;
        }
        float sum = __fadd_rn(__fadd_rn(__fadd_rn(center[x + 1], center[x - 1]), down[x]), up[x]);
        float value = __fmul_rn(0.25f, sum);
        if (v >= 1 && v <= (int)rows) {
            out[(v - 1) * (int)nx + x] = value;
        }
        float diff = value - center[x];
        residue = __fmul_rn(diff, diff);
    }
    add_block_residue(residue, norm);
}

// One iteration of one device's block of `rows` rows (one GPU of several driven by one
// process), as NVIDIA's multi_threaded_p2p_opt computes it: every row from `block` (its halos
// `halo_top` and `halo_bot`) into `out`, the first row also into `to_up` (the upper
// neighbour's bottom halo) and the last into `to_down` (the lower neighbour's top halo),
// stored straight into the neighbours' memory where they live on other GPUs, and the block's
// squared residual added to norm[0]. Threads cover rows 0..rows and columns 1..nx-1: launch a
// 2-D grid of at least nx - 2 by rows threads (thread x is column x + 1) with blocks of up to
// 1024 threads, blockDim.x a multiple of 32. One atomic add per block. `block` and `out` hold
// fewer than 2^31 elements.
__global__ void jacobi_peer(unsigned int nx, unsigned int rows,
                            const float* __restrict__ halo_top, const float* __restrict__ block,
                            const float* __restrict__ halo_bot, float* __restrict__ out,
                            float* __restrict__ to_up, float* __restrict__ to_down,
                            float* __restrict__ norm) {
    int x = blockIdx.x * blockDim.x + threadIdx.x + 1;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    float residue = 0.0f;
    if (x + 1 < (int)nx && r < (int)rows) {
        const float* center = block + r * (int)nx;
        const float* up = r == 0 ? halo_top : center - nx;
        const float* down = r + 1 == (int)rows ? halo_bot : center + nx;
        float sum = __fadd_rn(__fadd_rn(__fadd_rn(center[x + 1], center[x - 1]), down[x]), up[x]);
        float value = __fmul_rn(0.25f, sum);
        out[r * (int)nx + x] = value;
        if (r == 0) {
            to_up[x] = value;
        }
        if (r + 1 == (int)rows) {
            to_down[x] = value;
        }
        // No contraction is possible here (the product is __fmul_rn), so this is the host's
        // subtraction bit for bit.
        float diff = value - center[x];
        residue = __fmul_rn(diff, diff);
    }
    add_block_residue(residue, norm);
}

}  // extern "C"
