// Kernel of the `overlap` example: an element-wise transform with adjustable arithmetic
// intensity, so compute time can be matched to copy time.
//
// tools/build-ptx compiles this file to PTX beside it (NVRTC, compute_75).
// The CPU implementation in examples/src/overlap/cpu.rs does the same arithmetic; the
// `__f*_rn` intrinsics forbid FMA contraction, so both round identically.

extern "C" {

// For i < n: y = x, then `iters` times y = y * a + x; out[i] = y.
__global__ void transform(unsigned int n, unsigned int iters, float a, const float* in,
                          float* out) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float x = in[i];
    float y = x;
    for (unsigned int k = 0; k < iters; ++k) {
        y = __fadd_rn(__fmul_rn(y, a), x);
    }
    out[i] = y;
}

}
