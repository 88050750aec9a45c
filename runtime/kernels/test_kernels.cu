// Test kernels for gpu-pipeline's GPU tests and the launch benchmark.
//
// Compiled to PTX by tools/build-ptx (NVRTC 12.0, compute_75), the PTX committed beside
// this file. The sm_90 cubin beside it, for the tests that load a cubin, was built with nvcc.
// Every kernel is `extern "C"` so its PTX entry name is the plain C name that
// `Module::function` looks up.

extern "C" {

// Does nothing: the launch benchmark measures pure launch overhead with it.
__global__ void empty() {}

// y[i] = a * x[i] + y[i] for i < n.
__global__ void saxpy(unsigned int n, float a, const float* x, float* y) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

// out[0] += sum(in[0..n]): each block reduces its slice in dynamic shared memory
// (blockDim.x floats, blockDim.x a power of two), then one atomicAdd per block.
__global__ void reduce_sum(unsigned int n, const float* in, float* out) {
    extern __shared__ float partial[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    partial[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride) {
            partial[tid] += partial[tid + stride];
        }
        __syncthreads();
    }
    if (tid == 0) {
        atomicAdd(out, partial[0]);
    }
}

// data[i] += value for i < n: the link of the 100-kernel chain in the graph tests.
__global__ void add_scalar(unsigned int n, float value, float* data) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] += value;
    }
}

// Writes far outside any allocation: an illegal address the driver reports at the next
// synchronize, poisoning the context for the rest of the process.
__global__ void write_out_of_bounds(float* data) {
    // An address in the first page, which is never mapped (also not through HMM, where the
    // host's own first pages are unmapped). Computed from `data` so the compiler keeps it.
    volatile float* bad = (volatile float*)((unsigned long long)data & 0xFFFull) + 1;
    *bad = 1.0f;
}

}  // extern "C"
