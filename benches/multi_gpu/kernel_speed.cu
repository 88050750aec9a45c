// The speed of one Jacobi iteration's kernel alone, on one GPU, the ways `jacobi_multi
// --exchange peer` and NVIDIA's multi_threaded_p2p_opt can run it: a time of the kernels
// without the exchange, the graph or the processes around them, to tell a slower kernel from
// a slower step.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 benches/multi_gpu/kernel_speed.cu -lcuda -o kernel_speed
//   ./kernel_speed examples/kernels/jacobi_multi.ptx [nx rows]...
//
// Rows:
//   ptx (driver JIT)    our jacobi_peer, from the committed PTX, compiled by the driver at load
//   nvcc sm_90          the same source (examples/kernels/jacobi_multi.cu) compiled here by nvcc
//   before              jacobi_peer as it was (64-bit offsets, thread 0 on column 0)
//   anchor-style        a kernel written the way NVIDIA's is: one array with its halo rows,
//                       32-bit indices, column 1 at thread 0, CUB's block reduce
// Each is timed over ITER launches (norm every launch), 5 rounds alternating the variants;
// the table gives the median and the spread of microseconds per launch.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../../examples/kernels/jacobi_multi.cu"

#define CHECK(x)                                                                \
    do {                                                                        \
        auto e = (x);                                                           \
        if (e != 0) {                                                           \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, (int)e); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

template <int BX, int BY>
__global__ void anchor_style(float* __restrict__ const a_new, const float* __restrict__ const a,
                             float* __restrict__ const l2_norm, const int iy_start,
                             const int iy_end, const int nx, float* __restrict__ const to_top,
                             float* __restrict__ const to_bottom) {
    typedef cub::BlockReduce<float, BX, cub::BLOCK_REDUCE_WARP_REDUCTIONS, BY> BlockReduce;
    __shared__ typename BlockReduce::TempStorage temp;
    int iy = blockIdx.y * blockDim.y + threadIdx.y + iy_start;
    int ix = blockIdx.x * blockDim.x + threadIdx.x + 1;
    float local = 0.0f;
    if (iy < iy_end && ix < nx - 1) {
        const float v = 0.25f * (a[iy * nx + ix + 1] + a[iy * nx + ix - 1] +
                                 a[(iy + 1) * nx + ix] + a[(iy - 1) * nx + ix]);
        a_new[iy * nx + ix] = v;
        if (iy == iy_start) to_top[ix] = v;
        if (iy == iy_end - 1) to_bottom[ix] = v;
        float r = v - a[iy * nx + ix];
        local += r * r;
    }
    float sum = BlockReduce(temp).Sum(local);
    if (threadIdx.x == 0 && threadIdx.y == 0) atomicAdd(l2_norm, sum);
}

// jacobi_peer as it was before 2026-11-27: 64-bit row offsets, thread 0 on column 0 (which
// has nothing to do). Kept to show what the two changes bought.
__global__ void peer_before(unsigned int nx, unsigned int rows, const float* __restrict__ halo_top,
                            const float* __restrict__ block, const float* __restrict__ halo_bot,
                            float* __restrict__ out, float* __restrict__ to_up,
                            float* __restrict__ to_down, float* __restrict__ norm) {
    __shared__ float warp_sums[32];
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int r = blockIdx.y * blockDim.y + threadIdx.y;
    float residue = 0.0f;
    if (x >= 1 && x + 1 < nx && r < rows) {
        const float* center = block + (unsigned long long)r * nx;
        const float* up = r == 0 ? halo_top : center - nx;
        const float* down = r + 1 == rows ? halo_bot : center + nx;
        float value = __fmul_rn(
            0.25f, __fadd_rn(__fadd_rn(__fadd_rn(center[x + 1], center[x - 1]), down[x]), up[x]));
        out[(unsigned long long)r * nx + x] = value;
        if (r == 0) to_up[x] = value;
        if (r + 1 == rows) to_down[x] = value;
        float diff = __fsub_rn(value, center[x]);
        residue = __fmul_rn(diff, diff);
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        residue += __shfl_down_sync(0xffffffffu, residue, offset);
    unsigned int tid = threadIdx.y * blockDim.x + threadIdx.x;
    unsigned int lane = tid & 31u, warp = tid >> 5;
    if (lane == 0) warp_sums[warp] = residue;
    __syncthreads();
    if (warp == 0) {
        residue = warp_sums[lane];
        for (int offset = 16; offset > 0; offset >>= 1)
            residue += __shfl_down_sync(0xffffffffu, residue, offset);
        if (lane == 0) atomicAdd(norm, residue);
    }
}

static std::vector<float> times[4];

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s jacobi_multi.ptx [nx rows]...\n", argv[0]);
        return 2;
    }
    std::ifstream f(argv[1]);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string ptx = ss.str();
    std::vector<std::pair<int, int>> shapes;
    for (int i = 2; i + 1 < argc; i += 2) shapes.push_back({atoi(argv[i]), atoi(argv[i + 1])});
    if (shapes.empty()) shapes = {{16384, 8192}, {16384, 4096}, {32768, 16384}, {32768, 8192}};
    const int ITER = 200;
    CHECK(cuInit(0));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    CUmodule module;
    CHECK(cuModuleLoadData(&module, ptx.c_str()));
    CUfunction jit;
    CHECK(cuModuleGetFunction(&jit, module, "jacobi_peer"));
    printf("| nx | rows | ptx (driver JIT) us | nvcc sm_90 us | before us | anchor-style us | ptx/anchor | nvcc/anchor | before/anchor | spreads |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (auto [nx, rows] : shapes) {
        size_t row = (size_t)nx * sizeof(float);
        float *a, *b, *norm, *up, *down;
        // One array of rows + 2 rows per grid; ours reads its halos and block out of it.
        CHECK(cudaMalloc(&a, row * (rows + 2)));
        CHECK(cudaMalloc(&b, row * (rows + 2)));
        CHECK(cudaMalloc(&up, row));
        CHECK(cudaMalloc(&down, row));
        CHECK(cudaMalloc(&norm, sizeof(float)));
        CHECK(cudaMemset(a, 0, row * (rows + 2)));
        CHECK(cudaMemset(b, 0, row * (rows + 2)));
        cudaEvent_t start, stop;
        CHECK(cudaEventCreate(&start));
        CHECK(cudaEventCreate(&stop));
        unsigned int unx = nx, urows = rows;
        dim3 block(32, 32), ours_grid((nx - 2 + 31) / 32, (rows + 31) / 32),
            before_grid((nx + 31) / 32, (rows + 31) / 32),
            anchor_grid((nx + 31) / 32, (rows + 31) / 32);
        for (int round = 0; round < 6; ++round) {
            for (int variant = 0; variant < 4; ++variant) {
                CHECK(cudaEventRecord(start));
                for (int it = 0; it < ITER; ++it) {
                    float* src = (it & 1) ? b : a;
                    float* dst = (it & 1) ? a : b;
                    float* halo_top = src;
                    float* blk = src + nx;
                    float* halo_bot = src + (size_t)nx * (rows + 1);
                    float* out = dst + nx;
                    if (variant == 0) {
                        void* params[] = {&unx, &urows, &halo_top, &blk, &halo_bot,
                                          &out, &up, &down, &norm};
                        CHECK(cuLaunchKernel(jit, ours_grid.x, ours_grid.y, 1, 32, 32, 1, 0, 0,
                                             params, nullptr));
                    } else if (variant == 1) {
                        jacobi_peer<<<ours_grid, block>>>(unx, urows, halo_top, blk, halo_bot,
                                                          out, up, down, norm);
                    } else if (variant == 3) {
                        peer_before<<<before_grid, block>>>(unx, urows, halo_top, blk, halo_bot,
                                                            out, up, down, norm);
                    } else {
                        anchor_style<32, 32><<<anchor_grid, block>>>(dst, src, norm, 1, rows + 1,
                                                                     nx, up, down);
                    }
                }
                CHECK(cudaEventRecord(stop));
                CHECK(cudaEventSynchronize(stop));
                float ms;
                CHECK(cudaEventElapsedTime(&ms, start, stop));
                if (round > 0) times[variant].push_back(1000.0f * ms / ITER);
            }
        }
        double med[4], spread[4];
        for (int v = 0; v < 4; ++v) {
            auto t = times[v];
            std::sort(t.begin(), t.end());
            med[v] = t[t.size() / 2];
            spread[v] = 100.0 * (t.back() - t.front()) / med[v];
            times[v].clear();
        }
        printf("| %d | %d | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f | %.1f%% %.1f%% %.1f%% %.1f%% |\n",
               nx, rows, med[0], med[1], med[3], med[2], med[0] / med[2], med[1] / med[2],
               med[3] / med[2], spread[0], spread[1], spread[3], spread[2]);
        CHECK(cudaFree(a));
        CHECK(cudaFree(b));
        CHECK(cudaFree(up));
        CHECK(cudaFree(down));
        CHECK(cudaFree(norm));
    }
    return 0;
}
