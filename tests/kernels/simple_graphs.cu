// The kernels of NVIDIA's simpleCudaGraphs sample (Samples/3_CUDA_Features/simpleCudaGraphs),
// written again without cooperative groups (NVRTC has no cooperative_groups.h): the sum of a
// float array in two launches, `reduce` (one partial sum per block, in doubles) and
// `reduce_final` (the partial sums added by one block).
//
// `tests/benches/simple_graphs.rs` launches them through `gpu_pipeline!` (this file's PTX);
// `benches/anchors/simple_graphs.cu` includes this file and launches them as the sample does,
// so both sides run the same code.
//
// Launch geometry, as the sample's: 512 threads a block (SIMPLE_GRAPHS_THREADS, which both
// kernels require: their shared arrays hold one double per thread), `reduce` on
// `partials_size` blocks, `reduce_final` on one; no dynamic shared memory. Each block of
// `reduce` adds the elements `i` with `i / 512 % gridDim.x == blockIdx.x` (a grid-stride loop)
// and writes its sum to `partials[blockIdx.x]` when `blockIdx.x < partials_size`.

#define SIMPLE_GRAPHS_THREADS 512

// The sum of `value` over the 32 lanes of a warp, in lane 0.
__device__ double warp_sum(double value)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        value += __shfl_down_sync(0xffffffffu, value, offset);
    }
    return value;
}

extern "C" __global__ void reduce(const float* input, double* partials,
                                  unsigned long long input_size,
                                  unsigned long long partials_size)
{
    __shared__ double per_warp[SIMPLE_GRAPHS_THREADS / 32];
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    double sum = 0.0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < input_size; i += stride) {
        sum += (double)input[i];
    }
    sum = warp_sum(sum);
    if ((threadIdx.x & 31u) == 0) {
        per_warp[threadIdx.x / 32] = sum;
    }
    __syncthreads();

    // Thread 0 adds the warps' sums in order, as the sample's does.
    if (threadIdx.x == 0 && blockIdx.x < partials_size) {
        double block_sum = 0.0;
        for (unsigned int w = 0; w < blockDim.x / 32; w++) {
            block_sum += per_warp[w];
        }
        partials[blockIdx.x] = block_sum;
    }
}

extern "C" __global__ void reduce_final(const double* partials, double* result,
                                        unsigned long long partials_size)
{
    __shared__ double per_warp[SIMPLE_GRAPHS_THREADS / 32];
    double sum = 0.0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < partials_size; i += (unsigned long long)gridDim.x * blockDim.x) {
        sum += partials[i];
    }
    sum = warp_sum(sum);
    if ((threadIdx.x & 31u) == 0) {
        per_warp[threadIdx.x / 32] = sum;
    }
    __syncthreads();

    // The first warp adds the warps' sums; its lane 0 writes the block's, as the sample's.
    if (threadIdx.x < 32) {
        sum = threadIdx.x < blockDim.x / 32 ? per_warp[threadIdx.x] : 0.0;
        sum = warp_sum(sum);
        if (threadIdx.x == 0) {
            result[0] = sum;
        }
    }
}
