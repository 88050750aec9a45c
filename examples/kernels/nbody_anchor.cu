// The yardstick the `nbody` example measures itself against: the well-known tiled
// shared-memory all-pairs N-body kernel as published with GPU Gems 3, chapter 31, and in
// NVIDIA's cuda-samples `nbody` (written here from that public description). One kernel per
// step computes every body's acceleration tile by tile from shared memory with one rsqrtf
// per pair, then integrates (v += a dt, x += v dt) into a second pair of arrays, which the
// next step reads (ping-pong). The example launches it with raw CUDA driver calls, no
// gpu-pipeline in the way.
//
// tools/build-ptx compiles this file to nbody_anchor.ptx beside it (NVRTC, compute_75).

#define TILE 256  // threads per block = bodies per shared-memory tile

extern "C" {

__device__ __forceinline__ float3 body_body_interaction(float4 bi, float4 bj, float eps2,
                                                        float3 ai) {
    float3 r = make_float3(bj.x - bi.x, bj.y - bi.y, bj.z - bi.z);
    float dist_sqr = r.x * r.x + r.y * r.y + r.z * r.z + eps2;
    float inv_dist = rsqrtf(dist_sqr);
    float inv_dist_cube = inv_dist * inv_dist * inv_dist;
    float s = bj.w * inv_dist_cube;
    ai.x += r.x * s;
    ai.y += r.y * s;
    ai.z += r.z * s;
    return ai;
}

// One step for bodies i < n: launch with TILE threads per block, ceil(n / TILE) blocks.
__global__ void __launch_bounds__(TILE) integrate_bodies(unsigned int n, float dt, float eps2,
                                                         const float4* __restrict__ old_pos,
                                                         const float4* __restrict__ old_vel,
                                                         float4* __restrict__ new_pos,
                                                         float4* __restrict__ new_vel) {
    __shared__ float4 sh_pos[TILE];
    unsigned int i = blockIdx.x * TILE + threadIdx.x;
    float4 my_pos = i < n ? old_pos[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float3 acc = make_float3(0.0f, 0.0f, 0.0f);
    for (unsigned int tile = 0; tile * TILE < n; ++tile) {
        unsigned int j = tile * TILE + threadIdx.x;
        sh_pos[threadIdx.x] = j < n ? old_pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads();
#pragma unroll 32
        for (unsigned int k = 0; k < TILE; ++k) {
            acc = body_body_interaction(my_pos, sh_pos[k], eps2, acc);
        }
        __syncthreads();
    }
    if (i >= n) {
        return;
    }
    float4 vel = old_vel[i];
    vel.x += acc.x * dt;
    vel.y += acc.y * dt;
    vel.z += acc.z * dt;
    my_pos.x += vel.x * dt;
    my_pos.y += vel.y * dt;
    my_pos.z += vel.z * dt;
    new_pos[i] = my_pos;
    new_vel[i] = vel;
}

}
