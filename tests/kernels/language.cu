// Kernels of tests/tests/pipeline_language.rs: small element-wise kernels that the tests of
// windows, swaps, loops over chunks, ranges, kinds of step, steps that run ahead and host
// closures launch on whole buffers and on views of them. The CPU implementations in the test
// file do the same arithmetic; `__fmul_rn`/`__fadd_rn` keep the device from contracting it
// into an FMA, so both backends agree bit for bit.
//
// tools/build-ptx compiles this file to language.ptx beside it (NVRTC, compute_75).

extern "C" {

// x[i] = a * x[i] + b for i < n.
__global__ void axpb(unsigned int n, float a, float b, float* __restrict__ x) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = __fadd_rn(__fmul_rn(a, x[i]), b);
    }
}

// dst[i] = a * src[i] + b for i < n.
__global__ void affine(unsigned int n, float a, float b, const float* __restrict__ src,
                       float* __restrict__ dst) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = __fadd_rn(__fmul_rn(a, src[i]), b);
    }
}

// up[i] = down[i] = a * src[i] + b for i < n: one launch storing into both neighbours'
// halos (tests/src/onesided.rs, the window pipelines).
__global__ void affine2(unsigned int n, float a, float b, const float* __restrict__ src,
                        float* __restrict__ up, float* __restrict__ down) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = __fadd_rn(__fmul_rn(a, src[i]), b);
        up[i] = v;
        down[i] = v;
    }
}

// x[i] = offset + i for i < n: which range a launch wrote, and from where.
__global__ void iota(unsigned int n, float offset, float* __restrict__ x) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = __fadd_rn(offset, (float)i);
    }
}

// out[0] = the sum of x[0..n), by one thread in order (the CPU sums in the same order).
__global__ void sum_serial(unsigned int n, const float* __restrict__ x, float* __restrict__ out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float s = 0.0f;
        for (unsigned int i = 0; i < n; ++i) {
            s = __fadd_rn(s, x[i]);
        }
        out[0] = s;
    }
}

}
