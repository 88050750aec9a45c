// Kernel of the `halo` example: explicit heat diffusion on a band of rows. The same kernel
// computes the interior of a field and its two boundary rows, each launch on its own range
// of rows, so the interior can run while the boundary rows stream in from the host.
//
// tools/build-ptx compiles this file to halo.ptx beside it (NVRTC, compute_75).
// The host implementation in examples/src/halo/host.rs does the same arithmetic in the same
// order (no FMA contraction), so both backends agree bit for bit.

extern "C" {

// src holds rows + 2 rows of nx cells (one above and one below the band), dst the band's
// `rows` rows: dst[r][x] = c + alpha * (l + r + u + d - 4c) with c = src[r + 1][x], u and d
// the cells above and below, and insulated left and right walls (a neighbour outside reads
// as the cell itself). Launch with a 2-D grid of 32x8 blocks covering nx by rows.
__global__ void stencil_rows(unsigned int nx, unsigned int rows, float alpha,
                             const float* __restrict__ src, float* __restrict__ dst) {
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || r >= rows) {
        return;
    }
    unsigned int i = (r + 1) * nx + x;
    float c = src[i];
    float l = x > 0 ? src[i - 1] : c;
    float rr = x + 1 < nx ? src[i + 1] : c;
    float u = src[i - nx];
    float d = src[i + nx];
    float sum = __fadd_rn(__fadd_rn(l, rr), __fadd_rn(u, d));
    float lap = __fsub_rn(sum, __fmul_rn(4.0f, c));
    dst[r * nx + x] = __fadd_rn(c, __fmul_rn(alpha, lap));
}

}
