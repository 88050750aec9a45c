// Where heat2d's bandwidth goes: the example's `heat_step` kernel (included below; HEAT_ROWS
// rows per thread) against a device-to-device copy, a plain copy kernel, and variants of the
// step that compute other numbers of rows per thread (1: the example's kernel before it
// walked rows), each launched back to back on one stream (ping-pong between two fields),
// then forward+back captured as one graph and replayed as the example does. Prints GB/s (8
// bytes per cell and step) and the ratio to the copy, for docs/PERFORMANCE.md.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o heat_kernels benches/anchors/heat_kernels.cu && ./heat_kernels 4096

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../examples/kernels/heat2d.cu"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t r_ = (call);                                                           \
        if (r_ != cudaSuccess) {                                                           \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,               \
                         cudaGetErrorString(r_));                                          \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

__global__ void copy_kernel(unsigned int n, const float* __restrict__ src,
                            float* __restrict__ dst) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

// The same cell arithmetic as heat_step; each thread walks ROWS rows down one column, keeping
// the rows above and at it in registers.
template <int ROWS>
__global__ void heat_rows(unsigned int nx, unsigned int ny, float alpha,
                          const float* __restrict__ src, float* __restrict__ dst) {
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;
    if (x >= nx || y0 >= ny) return;
    unsigned int i = y0 * nx + x;
    float c = src[i];
    float d = y0 > 0 ? src[i - nx] : c;
#pragma unroll
    for (int k = 0; k < ROWS; ++k) {
        unsigned int y = y0 + k;
        if (y >= ny) break;
        float u = y + 1 < ny ? src[i + nx] : c;
        float l = x > 0 ? src[i - 1] : c;
        float r = x + 1 < nx ? src[i + 1] : c;
        float sum = __fadd_rn(__fadd_rn(l, r), __fadd_rn(d, u));
        float lap = __fsub_rn(sum, __fmul_rn(4.0f, c));
        dst[i] = __fadd_rn(c, __fmul_rn(alpha, lap));
        d = c;
        c = u;
        i += nx;
    }
}

int main(int argc, char** argv) {
    unsigned int n = argc > 1 ? std::atoi(argv[1]) : 4096;
    const int reps = 200;
    size_t cells = size_t(n) * n, bytes = cells * 4;
    float *a, *b;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemset(a, 0, bytes));
    CHECK(cudaMemset(b, 0, bytes));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    auto time = [&](auto&& body) {
        body();  // warm-up
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaEventRecord(e0, s));
        for (int r = 0; r < reps; ++r) body();
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        return 8.0 * cells * reps / (ms * 1e-3) / 1e9;  // GB/s, one step per body
    };
    double copy = time([&] { CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); });
    std::printf("variant GB/s ratio_to_copy\n");
    std::printf("memcpy_dtod %.1f 1.000\n", copy);
    auto row = [&](const char* name, double gbs) {
        std::printf("%s %.1f %.3f\n", name, gbs, gbs / copy);
    };
    row("copy_kernel", time([&] { copy_kernel<<<(cells + 255) / 256, 256, 0, s>>>(cells, a, b); }));
    bool flip = false;
    auto pingpong = [&](auto launch) {
        return [&, launch] {
            launch(flip ? b : a, flip ? a : b);
            flip = !flip;
        };
    };
    dim3 block(32, 8);
    const unsigned int tall = 8 * HEAT_ROWS;  // rows a 32x8 block of the example covers
    row("example_heat_step_32x8", time(pingpong([&](float* src, float* dst) {
            heat_step<<<dim3((n + 31) / 32, (n + tall - 1) / tall), block, 0, s>>>(n, n, 0.1f,
                                                                                  src, dst);
        })));
    row("heat_rows1_32x8", time(pingpong([&](float* src, float* dst) {
            heat_rows<1><<<dim3((n + 31) / 32, (n + 7) / 8), block, 0, s>>>(n, n, 0.1f, src,
                                                                           dst);
        })));
    row("heat_rows4_32x8", time(pingpong([&](float* src, float* dst) {
            heat_rows<4><<<dim3((n + 31) / 32, (n + 31) / 32), block, 0, s>>>(n, n, 0.1f, src,
                                                                             dst);
        })));
    row("heat_rows8_32x8", time(pingpong([&](float* src, float* dst) {
            heat_rows<8><<<dim3((n + 31) / 32, (n + 63) / 64), block, 0, s>>>(n, n, 0.1f, src,
                                                                             dst);
        })));
    row("heat_rows8_64x4", time(pingpong([&](float* src, float* dst) {
            heat_rows<8><<<dim3((n + 63) / 64, (n + 31) / 32), dim3(64, 4), 0, s>>>(n, n, 0.1f,
                                                                                  src, dst);
        })));
    // forward + back as one graph, replayed: two steps per launch.
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    heat_step<<<dim3((n + 31) / 32, (n + tall - 1) / tall), block, 0, s>>>(n, n, 0.1f, a, b);
    heat_step<<<dim3((n + 31) / 32, (n + tall - 1) / tall), block, 0, s>>>(n, n, 0.1f, b, a);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    row("graph_2_steps_per_launch", 2 * time([&] { CHECK(cudaGraphLaunch(ge, s)); }));
    return 0;
}
