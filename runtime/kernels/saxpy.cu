// The kernel of the first program in README.md and of the crate docs' examples.
//
// tools/build-ptx compiles it to saxpy.ptx beside it (NVRTC 12.0, compute_75: every driver
// from CUDA 12.0 on loads it); `nvcc -ptx -arch=compute_75 saxpy.cu` works too.

// y[i] = a * x[i] + y[i] for i < n.
extern "C" __global__ void saxpy(unsigned int n, float a, const float* x, float* y) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
