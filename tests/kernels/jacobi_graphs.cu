// The kernels of NVIDIA's jacobiCudaGraphs sample (Samples/3_CUDA_Features/jacobiCudaGraphs),
// written again without cooperative groups (NVRTC has no cooperative_groups.h) and with the
// matrix order a parameter: one Jacobi sweep of a dense `n x n` system `A x = b` that also
// adds the sweep's sum of |dx| to `sum`, and the final error sum of |x - 1|.
//
// `tests/benches/jacobi_graphs.rs` launches them through `gpu_pipeline!` (this file's PTX);
// `benches/anchors/jacobi_graphs.cu` includes this file and launches them as the sample does,
// so both sides run the same code.
//
// Launch geometry, as the sample's: `jacobi_method` with 256 threads a block and
// `n / JACOBI_ROWS_PER_CTA + 2` blocks, `x` in dynamic shared memory (`n` doubles, 4 KiB at
// the sample's n = 512; the sample sizes it statically), no other shared memory; `final_error`
// with 256 threads a block, `n / 256 + 1` blocks and `(256 / 32 + 1) * 8` bytes of dynamic
// shared memory.

// Rows of A per block: a power of two, at most 32.
#define JACOBI_ROWS_PER_CTA 8

extern "C" __global__ void jacobi_method(unsigned int n, const float* A, const double* b,
                                         float conv_threshold, const double* x,
                                         double* x_new, double* sum)
{
    extern __shared__ double x_shared[];  // n doubles
    __shared__ double b_shared[JACOBI_ROWS_PER_CTA + 1];
    (void)conv_threshold;  // the sample passes it and leaves it unused

    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) {
        x_shared[i] = x[i];
    }
    if (threadIdx.x < JACOBI_ROWS_PER_CTA) {
        unsigned int k = threadIdx.x;
        for (unsigned int i = k + blockIdx.x * JACOBI_ROWS_PER_CTA;
             k < JACOBI_ROWS_PER_CTA && i < n; k += JACOBI_ROWS_PER_CTA, i += JACOBI_ROWS_PER_CTA) {
            b_shared[i % (JACOBI_ROWS_PER_CTA + 1)] = b[i];
        }
    }
    __syncthreads();

    // Each warp sums its part of each of the block's rows, then subtracts it from b.
    for (unsigned int k = 0, i = blockIdx.x * JACOBI_ROWS_PER_CTA;
         k < JACOBI_ROWS_PER_CTA && i < n; k++, i++) {
        double row_sum = 0.0;
        for (unsigned int j = threadIdx.x; j < n; j += blockDim.x) {
            row_sum += (double)A[(size_t)i * n + j] * x_shared[j];
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            row_sum += __shfl_down_sync(0xffffffffu, row_sum, offset);
        }
        if ((threadIdx.x & 31u) == 0) {
            atomicAdd(&b_shared[i % (JACOBI_ROWS_PER_CTA + 1)], -row_sum);
        }
    }
    __syncthreads();

    // The first JACOBI_ROWS_PER_CTA threads finish one row each and sum |dx| over them.
    if (threadIdx.x < JACOBI_ROWS_PER_CTA) {
        double temp_sum = 0.0;
        unsigned int k = threadIdx.x;
        for (unsigned int i = k + blockIdx.x * JACOBI_ROWS_PER_CTA;
             k < JACOBI_ROWS_PER_CTA && i < n; k += JACOBI_ROWS_PER_CTA, i += JACOBI_ROWS_PER_CTA) {
            double dx = b_shared[i % (JACOBI_ROWS_PER_CTA + 1)];
            dx /= A[(size_t)i * n + i];
            x_new[i] = x_shared[i] + dx;
            temp_sum += fabs(dx);
        }
        const unsigned int tile = (1u << JACOBI_ROWS_PER_CTA) - 1u;
        for (int offset = JACOBI_ROWS_PER_CTA / 2; offset > 0; offset /= 2) {
            temp_sum += __shfl_down_sync(tile, temp_sum, offset, JACOBI_ROWS_PER_CTA);
        }
        if (threadIdx.x == 0) {
            atomicAdd(sum, temp_sum);
        }
    }
}

// Adds sum over i of |x[i] - 1| to `g_sum` (the exact solution of the sample's system is all
// ones). Dynamic shared memory: one double per warp of the block, plus one.
extern "C" __global__ void final_error(unsigned int n, const double* x, double* g_sum)
{
    extern __shared__ double warp_sum[];
    double sum = 0.0;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x) {
        sum += fabs(x[i] - 1.0);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if ((threadIdx.x & 31u) == 0) {
        warp_sum[threadIdx.x / 32] = sum;
    }
    __syncthreads();

    double block_sum = threadIdx.x < blockDim.x / 32 ? warp_sum[threadIdx.x] : 0.0;
    if (threadIdx.x < 32) {
        for (int offset = 16; offset > 0; offset /= 2) {
            block_sum += __shfl_down_sync(0xffffffffu, block_sum, offset);
        }
        if (threadIdx.x == 0) {
            atomicAdd(g_sum, block_sum);
        }
    }
}
