// Kernels of the `nbody` example: an all-pairs gravitational N-body step, kick-drift-kick
// leapfrog. Bodies are float4s: pos = (x, y, z, mass), vel = (vx, vy, vz, 0),
// acc = (ax, ay, az, 0).
//
// tools/build-ptx compiles this file to nbody.ptx beside it (NVRTC, compute_75).
// The force is the kernel a CUDA programmer writes (GPU Gems 3, chapter 31): each block loads
// the bodies tile by tile into shared memory, every thread sums the pulls of a tile on its
// body, and 1/r^3 comes from one rsqrtf. rsqrtf (2 ulp), FMA contraction and float rounding
// make the last bits differ from the CPU implementation (examples/src/nbody/cpu.rs), which
// sums in the same order (j ascending); the example checks against its CPU reference within a
// tolerance.

// Bodies per shared-memory tile, which is also the block size accel_kick must be launched with.
#define TILE 256

extern "C" {

// First half of a step: v += a * dt/2, then x += v * dt, for bodies i < n.
__global__ void kick_drift(unsigned int n, float dt, const float4* __restrict__ acc,
                           float4* __restrict__ vel, float4* __restrict__ pos) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float half = 0.5f * dt;
    float4 a = acc[i];
    float4 v = vel[i];
    float4 p = pos[i];
    v.x += a.x * half;
    v.y += a.y * half;
    v.z += a.z * half;
    p.x += v.x * dt;
    p.y += v.y * dt;
    p.z += v.z * dt;
    vel[i] = v;
    pos[i] = p;
}

// The pull of body bj on body bi, added to ai: m_j * d / (|d|^2 + eps2)^(3/2), d = x_j - x_i.
// For j == i, d = 0 and nothing is added; eps2 > 0 keeps every term finite.
__device__ __forceinline__ float3 body_body(float4 bi, float4 bj, float eps2, float3 ai) {
    float dx = bj.x - bi.x;
    float dy = bj.y - bi.y;
    float dz = bj.z - bi.z;
    float dist2 = dx * dx + dy * dy + dz * dz + eps2;
    float inv = rsqrtf(dist2);
    float s = bj.w * inv * inv * inv;
    ai.x += dx * s;
    ai.y += dy * s;
    ai.z += dz * s;
    return ai;
}

// Second half of a step: the acceleration of every body i < n from all n bodies into acc,
// then v += a * dt/2. Launch with TILE threads per block and ceil(n / TILE) blocks. Threads
// past n still load their share of each tile; a tile's slots past n hold zero-mass bodies.
__global__ void __launch_bounds__(TILE) accel_kick(unsigned int n, float dt, float eps2,
                                                   const float4* __restrict__ pos,
                                                   float4* __restrict__ acc,
                                                   float4* __restrict__ vel) {
    __shared__ float4 tile[TILE];
    unsigned int i = blockIdx.x * TILE + threadIdx.x;
    float4 bi = i < n ? pos[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float3 a = make_float3(0.0f, 0.0f, 0.0f);
    for (unsigned int start = 0; start < n; start += TILE) {
        unsigned int j = start + threadIdx.x;
        tile[threadIdx.x] = j < n ? pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads();
#pragma unroll 32
        for (unsigned int k = 0; k < TILE; ++k) {
            a = body_body(bi, tile[k], eps2, a);
        }
        __syncthreads();
    }
    if (i >= n) {
        return;
    }
    float half = 0.5f * dt;
    acc[i] = make_float4(a.x, a.y, a.z, 0.0f);
    float4 v = vel[i];
    v.x += a.x * half;
    v.y += a.y * half;
    v.z += a.z * half;
    vel[i] = v;
}

}
