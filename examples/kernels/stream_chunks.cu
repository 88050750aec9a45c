// Kernel of the `stream_chunks` example: an element-wise transform of one chunk in place,
// with adjustable arithmetic, so compute can be kept short next to the copies.
//
// tools/build-ptx compiles this file to stream_chunks.ptx beside it (NVRTC, compute_75).
// The host implementation in examples/src/stream_chunks/host.rs does the same arithmetic;
// the `__f*_rn` intrinsics forbid FMA contraction, so both round identically.

extern "C" {

// For i < n: v = x[i], then `iters` times v = v * a + 1; x[i] = v.
__global__ void transform(unsigned int n, unsigned int iters, float a, float* __restrict__ x) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float v = x[i];
    for (unsigned int k = 0; k < iters; ++k) {
        v = __fadd_rn(__fmul_rn(v, a), 1.0f);
    }
    x[i] = v;
}

}
