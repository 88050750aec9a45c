// Kernels of the `nbody` example: an all-pairs gravitational N-body step, kick-drift-kick
// leapfrog. Bodies are stored as 4 floats each: pos = (x, y, z, mass), vel = (vx, vy, vz, 0),
// acc = (ax, ay, az, 0).
//
// tools/build-ptx compiles this file to PTX beside it (NVRTC, compute_75).
// The host implementations in examples/src/nbody/host.rs do the same arithmetic in the same
// order; the `__f*_rn` intrinsics forbid FMA contraction, so both round identically.

extern "C" {

// First half of a step: v += a * dt/2, then x += v * dt, for bodies i < n.
__global__ void kick_drift(unsigned int n, float dt, const float* acc, float* vel, float* pos) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float half = __fmul_rn(0.5f, dt);
    for (unsigned int k = 0; k < 3; ++k) {
        float v = __fadd_rn(vel[4 * i + k], __fmul_rn(acc[4 * i + k], half));
        vel[4 * i + k] = v;
        pos[4 * i + k] = __fadd_rn(pos[4 * i + k], __fmul_rn(v, dt));
    }
}

// Second half of a step: a = sum over all j of m_j * d / (|d|^2 + eps2)^(3/2) with d = x_j - x_i
// (j in ascending order; j == i adds zero), stored in acc, then v += a * dt/2.
__global__ void accel_kick(unsigned int n, float dt, float eps2, const float* pos, float* acc,
                           float* vel) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float xi = pos[4 * i], yi = pos[4 * i + 1], zi = pos[4 * i + 2];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (unsigned int j = 0; j < n; ++j) {
        float dx = __fsub_rn(pos[4 * j], xi);
        float dy = __fsub_rn(pos[4 * j + 1], yi);
        float dz = __fsub_rn(pos[4 * j + 2], zi);
        float r2 = __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)),
                                       __fmul_rn(dz, dz)),
                             eps2);
        float inv_r3 = __fdiv_rn(1.0f, __fmul_rn(r2, __fsqrt_rn(r2)));
        float s = __fmul_rn(pos[4 * j + 3], inv_r3);
        ax = __fadd_rn(ax, __fmul_rn(dx, s));
        ay = __fadd_rn(ay, __fmul_rn(dy, s));
        az = __fadd_rn(az, __fmul_rn(dz, s));
    }
    float half = __fmul_rn(0.5f, dt);
    acc[4 * i] = ax;
    acc[4 * i + 1] = ay;
    acc[4 * i + 2] = az;
    acc[4 * i + 3] = 0.0f;
    vel[4 * i] = __fadd_rn(vel[4 * i], __fmul_rn(ax, half));
    vel[4 * i + 1] = __fadd_rn(vel[4 * i + 1], __fmul_rn(ay, half));
    vel[4 * i + 2] = __fadd_rn(vel[4 * i + 2], __fmul_rn(az, half));
}

}
