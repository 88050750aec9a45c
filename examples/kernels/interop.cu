// Kernel of the `interop` example.
//
// tools/build-ptx compiles this file to PTX beside it (NVRTC, compute_75).
// The CPU implementation is in examples/src/interop.rs.

extern "C" {

// data[i] = data[i] * factor + offset for i < n (no FMA contraction, as on the CPU).
__global__ void scale_offset(unsigned int n, float factor, float offset, float* data) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] = __fadd_rn(__fmul_rn(data[i], factor), offset);
    }
}

}
