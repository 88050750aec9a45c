// Kernels of the `cublas` example.
//
// tools/build-ptx compiles this file to PTX beside it (NVRTC, compute_75).
// The CPU implementations are in examples/src/cublas.rs.

extern "C" {

// data[i] = data[i] * factor + offset for i < n (no FMA contraction, as on the CPU).
__global__ void scale_offset(unsigned int n, float factor, float offset, float* data) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] = __fadd_rn(__fmul_rn(data[i], factor), offset);
    }
}

// c = a * b for row-major a (m x k), b (k x n), c (m x n): one thread per element of c, the
// sum in ascending k. The stand-in for cuBLAS where there is none (and on the CPU backend).
__global__ void gemm_naive(unsigned int m, unsigned int n, unsigned int k, const float* a,
                           const float* b, float* c) {
    unsigned int col = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < m && col < n) {
        float sum = 0.0f;
        for (unsigned int i = 0; i < k; ++i) {
            sum = __fmaf_rn(a[row * k + i], b[i * n + col], sum);
        }
        c[row * n + col] = sum;
    }
}

}
