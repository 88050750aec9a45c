//! CPU implementations of `examples/kernels/nbody.cu`: what the CPU backend runs for one
//! launch, over the whole slices (4 floats per body). The same formulas summed in the same
//! order as the CUDA C; the kernel's `rsqrtf` (2 ulp) and FMA contraction change the last
//! bits, so the backends agree within the example's tolerance, not bit for bit.

/// `kick_drift(n, dt, acc, vel, pos)`: `v += a dt/2`, then `x += v dt`.
pub fn kick_drift(n: u32, dt: f32, acc: &[f32], vel: &mut [f32], pos: &mut [f32]) {
    let half = 0.5 * dt;
    for i in 0..n as usize {
        for k in 0..3 {
            let v = vel[4 * i + k] + acc[4 * i + k] * half;
            vel[4 * i + k] = v;
            pos[4 * i + k] += v * dt;
        }
    }
}

/// `accel_kick(n, dt, eps2, pos, acc, vel)`: the softened all-pairs acceleration of every
/// body into `acc`, then `v += a dt/2`.
pub fn accel_kick(n: u32, dt: f32, eps2: f32, pos: &[f32], acc: &mut [f32], vel: &mut [f32]) {
    let half = 0.5 * dt;
    for i in 0..n as usize {
        let a = acceleration(pos, n as usize, i, eps2);
        acc[4 * i..4 * i + 4].copy_from_slice(&[a[0], a[1], a[2], 0.0]);
        for k in 0..3 {
            vel[4 * i + k] += a[k] * half;
        }
    }
}

/// The acceleration of body `i`: one thread of `accel_kick` (`j` ascending, as the kernel's
/// tiles go; `j == i` adds 0).
#[inline]
pub fn acceleration(pos: &[f32], n: usize, i: usize, eps2: f32) -> [f32; 3] {
    let (xi, yi, zi) = (pos[4 * i], pos[4 * i + 1], pos[4 * i + 2]);
    let (mut ax, mut ay, mut az) = (0.0f32, 0.0f32, 0.0f32);
    for j in 0..n {
        let dx = pos[4 * j] - xi;
        let dy = pos[4 * j + 1] - yi;
        let dz = pos[4 * j + 2] - zi;
        let dist2 = dx * dx + dy * dy + dz * dz + eps2;
        let inv = 1.0 / dist2.sqrt();
        let s = pos[4 * j + 3] * inv * inv * inv;
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    [ax, ay, az]
}
