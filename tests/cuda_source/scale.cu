// CUDA C for tests/tests/cpu_without_cuda.rs: no PTX is generated from it (it is outside any
// `kernels/` folder, so tools/build-ptx leaves it alone); the CPU backend never compiles it.
extern "C" __global__ void scale(unsigned n, float factor, float* data) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}
