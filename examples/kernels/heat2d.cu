// Kernels of the `heat2d` example: one explicit Euler step of 2-D heat diffusion, and the
// sampling of a field into a small preview that is streamed back to the host.
//
// tools/build-ptx compiles this file to heat2d.ptx beside it (NVRTC, compute_75).
// The CPU implementations in examples/src/heat2d/cpu.rs do the same arithmetic in the same
// order. The `__f*_rn` intrinsics forbid contracting a multiply and an add into one FMA, so
// the device and the host round identically and agree bit for bit; the step is bound by
// memory bandwidth, so they cost nothing.

extern "C" {

// dst = src + alpha * laplacian(src) on an nx-by-ny row-major grid (index y * nx + x) with
// insulated walls: a neighbour outside the grid reads as the cell itself, so no heat crosses
// the boundary and the total is conserved. Launch with a 2-D grid covering nx by ny, blocks
// 32 wide so that a warp reads whole 128-byte rows; the neighbours' loads hit the cache, so
// each cell costs one 4-byte read and one 4-byte write of device memory.
__global__ void heat_step(unsigned int nx, unsigned int ny, float alpha,
                          const float* __restrict__ src, float* __restrict__ dst) {
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) {
        return;
    }
    unsigned int i = y * nx + x;
    float c = src[i];
    float l = x > 0 ? src[i - 1] : c;
    float r = x + 1 < nx ? src[i + 1] : c;
    float d = y > 0 ? src[i - nx] : c;
    float u = y + 1 < ny ? src[i + nx] : c;
    float sum = __fadd_rn(__fadd_rn(l, r), __fadd_rn(d, u));
    float lap = __fsub_rn(sum, __fmul_rn(4.0f, c));
    dst[i] = __fadd_rn(c, __fmul_rn(alpha, lap));
}

// The preview: every stride-th cell of every stride-th row of src, row-major into dst, an mx
// by my grid (mx = ceil(nx / stride) and my = ceil(ny / stride) take every such cell; smaller
// ones crop it). Launch with a 2-D grid covering mx by my. The preview's extent is passed
// rather than derived so that the bounds the declaration states hold by reading this code:
// src is indexed below nx * ny and dst below mx * my, whatever the arguments.
__global__ void sample(unsigned int nx, unsigned int ny, unsigned int stride, unsigned int mx,
                       unsigned int my, const float* __restrict__ src, float* __restrict__ dst) {
    if (stride == 0) {
        return;
    }
    unsigned int px = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int py = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned int w = min(mx, (nx + stride - 1) / stride);
    unsigned int h = min(my, (ny + stride - 1) / stride);
    if (px >= w || py >= h) {
        return;
    }
    dst[py * mx + px] = src[(py * stride) * nx + px * stride];
}

}
