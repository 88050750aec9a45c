// CUDA C for tests/tests/newcomer_errors.rs (never compiled on the CPU backend).
extern "C" __global__ void diffuse(unsigned n, float alpha, const float* src, float* dst) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i + 1 < n) dst[i] = src[i] + alpha * (src[i - 1] - 2.0f * src[i] + src[i + 1]);
}
