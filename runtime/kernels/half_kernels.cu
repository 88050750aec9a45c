// Half-precision test kernels: `half::f16` and `half::bf16` buffers and scalars.
//
// Compiled to PTX by tools/build-ptx (NVRTC 12.0, compute_75), the PTX committed beside this
// file. No <cuda_fp16.h>: a `__half` or `__nv_bfloat16` is 2 bytes of bits, passed and stored
// here as `unsigned short`, so the layouts match `half::f16`/`half::bf16` (and CUDA's types)
// while the kernels need no header. Arithmetic is in f32, rounded to nearest even on the way
// back, as `half`'s `from_f32` rounds: the CPU implementations in tests/tests/half_elements.rs
// give the same bits.

extern "C" {

__device__ float f16_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ unsigned short f32_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// bfloat16 is the top half of an f32: widening is a shift, narrowing rounds to nearest even
// (NaN stays a quiet NaN). sm_75 has no bf16 conversion instruction.
__device__ float bf16_to_f32(unsigned short b) {
    return __uint_as_float(((unsigned int)b) << 16);
}

__device__ unsigned short f32_to_bf16(float f) {
    unsigned int bits = __float_as_uint(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return (unsigned short)((bits >> 16) | 0x0040u);
    }
    unsigned int rounding = 0x7fffu + ((bits >> 16) & 1u);
    return (unsigned short)((bits + rounding) >> 16);
}

// data[i] = data[i] * factor + offset in f32 (no FMA contraction), rounded back to f16.
__global__ void scale_offset_f16(unsigned int n, unsigned short factor, unsigned short offset,
                                 unsigned short* data) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = __fadd_rn(__fmul_rn(f16_to_f32(data[i]), f16_to_f32(factor)),
                            f16_to_f32(offset));
        data[i] = f32_to_f16(x);
    }
}

// The same for bf16.
__global__ void scale_offset_bf16(unsigned int n, unsigned short factor, unsigned short offset,
                                  unsigned short* data) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = __fadd_rn(__fmul_rn(bf16_to_f32(data[i]), bf16_to_f32(factor)),
                            bf16_to_f32(offset));
        data[i] = f32_to_bf16(x);
    }
}

// out[i] = f32(in[i]) for i < n: widens f16 to f32 exactly.
__global__ void widen_f16(unsigned int n, const unsigned short* in, float* out) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = f16_to_f32(in[i]);
    }
}

}
