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
// Two choices in the row sweep all three multi-row kernels share are measured, not style
// (benches/multi_gpu/kernel_speed.cu on one H200, docs/PERFORMANCE.md): row offsets are
// 32-bit, so a buffer holds fewer than 2^31 elements (the example refuses bigger blocks), and
// thread 0 of block 0 is column 1, as in NVIDIA's kernel. With 64-bit offsets and thread 0 on
// column 0 (which has nothing to do), `jacobi_peer` took 1.024x the time of a kernel written as
// NVIDIA's at every size; now 0.998x.
//
// The one-process-per-GPU step (`nccl`) splits each iteration in two kernels that run at once
// on two streams: `jacobi_edges` computes the block's first and last rows (which the halo
// exchange sends) and `jacobi_mid` every row between them, each adding its rows' residual to
// its own accumulator. Neither computes a row twice and neither picks among more than two row
// buffers per thread; the mid sweep reads no halo, so it need not wait for the exchange.

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

// One cell's new value from its row `center` and the rows `up` and `down`, at column x.
// The `__f*_rn` intrinsics keep the order of the host's operations (no FMA contraction).
__device__ __forceinline__ float stencil(const float* __restrict__ up,
                                         const float* __restrict__ center,
                                         const float* __restrict__ down, int x) {
    float sum = __fadd_rn(__fadd_rn(__fadd_rn(center[x + 1], center[x - 1]), down[x]), up[x]);
    return __fmul_rn(0.25f, sum);
}

// The squared residual of a cell whose old value is `old`. No contraction is possible here
// (the product is __fmul_rn), so this is the host's subtraction bit for bit.
__device__ __forceinline__ float residue_of(float value, float old) {
    float diff = value - old;
    return __fmul_rn(diff, diff);
}

// The sweep of `jacobi_peer` and `jacobi_mid`: every row r < rows of `block` into `out` (the
// row above row 0 is `above`, the row below the last `below`), the first row also into `to_up`
// and the last into `to_down` when kStoreEdges, the squared residual added to norm[0]. Threads
// cover rows 0..rows and columns 1..nx-1 (thread x is column x + 1).
template <bool kStoreEdges>
__device__ __forceinline__ void sweep_rows(unsigned int nx, unsigned int rows,
                                           const float* __restrict__ above,
                                           const float* __restrict__ block,
                                           const float* __restrict__ below,
                                           float* __restrict__ out, float* __restrict__ to_up,
                                           float* __restrict__ to_down,
                                           float* __restrict__ norm) {
    int x = blockIdx.x * blockDim.x + threadIdx.x + 1;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    float residue = 0.0f;
    if (x + 1 < (int)nx && r < (int)rows) {
        const float* center = block + r * (int)nx;
        const float* up = r == 0 ? above : center - nx;
        const float* down = r + 1 == (int)rows ? below : center + nx;
        float value = stencil(up, center, down, x);
        out[r * (int)nx + x] = value;
        if (kStoreEdges) {
            if (r == 0) {
                to_up[x] = value;
            }
            if (r + 1 == (int)rows) {
                to_down[x] = value;
            }
        }
        residue = residue_of(value, center[x]);
    }
    add_block_residue(residue, norm);
}

extern "C" {

// The block's two edge rows, each from its halo and its neighbour row in `mid`: with
// blockIdx.y == 0 the first row `top` (`halo_top` above it, `mid`'s first row below) into
// `out_top`, with blockIdx.y == 1 the last row `bot` (`mid`'s row `rows - 1` above it,
// `halo_bot` below) into `out_bot`; the two rows' squared residual added to norm[0]. Launch a
// grid of at least nx - 2 by exactly 2 threads in 1-D blocks (blockDim.y == 1), blockDim.x a
// multiple of 32 (thread x is column x + 1). `mid` holds fewer than 2^31 elements.
__global__ void jacobi_edges(unsigned int nx, unsigned int rows,
                             const float* __restrict__ halo_top, const float* __restrict__ top,
                             const float* __restrict__ mid, const float* __restrict__ bot,
                             const float* __restrict__ halo_bot, float* __restrict__ out_top,
                             float* __restrict__ out_bot, float* __restrict__ norm) {
    int x = blockIdx.x * blockDim.x + threadIdx.x + 1;
    float residue = 0.0f;
    if (x + 1 < (int)nx) {
        bool first = blockIdx.y == 0;
        const float* up = first ? halo_top : mid + ((int)rows - 1) * (int)nx;
        const float* center = first ? top : bot;
        const float* down = first ? mid : halo_bot;
        float value = stencil(up, center, down, x);
        (first ? out_top : out_bot)[x] = value;
        residue = residue_of(value, center[x]);
    }
    add_block_residue(residue, norm);
}

// The rows between a block's edge rows: the `rows` rows of `mid` into `out` (the row above
// `mid`'s first is `top`, the row below its last `bot`), their squared residual added to
// norm[0]. It reads no halo. Launch a 2-D grid of at least nx - 2 by rows threads (thread x is
// column x + 1) with blocks of up to 1024 threads, blockDim.x a multiple of 32. One atomic add
// per block. `mid` and `out` hold fewer than 2^31 elements.
__global__ void jacobi_mid(unsigned int nx, unsigned int rows, const float* __restrict__ top,
                           const float* __restrict__ mid, const float* __restrict__ bot,
                           float* __restrict__ out, float* __restrict__ norm) {
    sweep_rows<false>(nx, rows, top, mid, bot, out, nullptr, nullptr, norm);
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
    sweep_rows<true>(nx, rows, halo_top, block, halo_bot, out, to_up, to_down, norm);
}

}  // extern "C"
