// The raw C++ anchor of `jacobi --device-loop`: the same Jacobi sweeps and residual
// reduction (the example's own kernels, included below), converged inside one CUDA graph by a
// conditional WHILE node built with the driver API, and the same solver driven from the host
// (one graph launch per sweep pair, the residual copied back and tested on the host). Prints
// the time per sweep of both, for docs/PERFORMANCE.md.
//
// Build and run on the GPU machine (CUDA 12.4+ driver and toolkit):
//   nvcc -O3 -arch=sm_90 -o jacobi_while benches/anchors/jacobi_while.cu -lcuda
//   ./jacobi_while 512 1e-4 20000
// Arguments: grid size N (N x N), tolerance, maximum sweeps. Output: one line per variant,
// `variant sweeps time_ms us_per_sweep residual`. Three switches, each a question about
// where the generated device loop's time could differ from this one's:
//   JACOBI_PTX=examples/kernels/jacobi.ptx    the sweep and the reduction from the example's
//                                             committed PTX, compiled by the driver as ours are;
//   COND_PTX=runtime/kernels/conditions.ptx   the library's loop test (`gp_loop_gt_f32`, which
//                                             also counts and marks the loop's state) instead
//                                             of `keep_going`;
//   POOL=1                                    the buffers from the stream-ordered pool
//                                             (cudaMallocAsync), as the library allocates them;
//   GAP=BYTES                                 both grids from one allocation, the second
//                                             BYTES past the first's end (where they lie
//                                             relative to each other);
//   REPEAT=N                                  N more device-loop solves at the end, each on
//                                             new pool grids with a new graph, as the
//                                             language bench runs its own (time of each).
// H100, 2026-11-29, five alternating runs each: none of the three changed the time per sweep
// by more than 0.1% (5.777 against 5.778 µs; 13.71 against 13.93 ms in all with the library's
// test; 5.746 against 5.753 µs). GAP, three runs at each of nine distances from 0 B to 3 MiB:
// 13.96 to 14.00 ms up to 1 MiB, 14.10 at 3 MiB, against 13.99 with separate allocations.
// REPEAT=8, three processes: 13.78 to 14.33 ms, alternating with where the pool puts the grids
// (median 14.05); `language --device-loop-repeat 8`, the same way: median 13.97.
//
// Each WHILE iteration runs two sweeps (u -> u_new, u_new -> u; the first one's block maxima
// are not reduced) and one reduction, then the condition kernel: the same work per iteration
// as the generated device loop.

#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../examples/kernels/jacobi.cu"

#include "raw_graph.cuh"

// Keeps looping while the residual is above the tolerance and fewer than `max_iters`
// iterations ran; counts iterations.
__global__ void keep_going(cudaGraphConditionalHandle handle, const float* residual, float tol,
                           unsigned int* iterations, unsigned int max_iters) {
    unsigned int done = ++*iterations;
    cudaGraphSetConditional(handle, (*residual > tol && done < max_iters) ? 1 : 0);
}

// Loads the PTX file at `path` as a module; false (and a message) when it cannot.
static bool load_module(const char* path, CUmodule* module) {
    std::FILE* f = std::fopen(path, "rb");
    if (!f) {
        std::printf("cannot open %s\n", path);
        return false;
    }
    std::vector<char> ptx;
    char chunk[4096];
    for (size_t got; (got = std::fread(chunk, 1, sizeof chunk, f)) > 0;) {
        ptx.insert(ptx.end(), chunk, chunk + got);
    }
    std::fclose(f);
    ptx.push_back('\0');
    CUresult code = cuModuleLoadData(module, ptx.data());
    if (code != CUDA_SUCCESS) {
        std::printf("cuModuleLoadData(%s) failed: %d\n", path, static_cast<int>(code));
        return false;
    }
    return true;
}

// The kernels of the device loop's body, and their launch shape.
struct LoopKernels {
    CUfunction sweep, reduce, cond;
    dim3 grid, block;
};

// The device loop's graph: one WHILE node whose body is sweep (`sweep_a`), sweep (`sweep_b`),
// the reduction and the condition kernel. The node's handle is written to `*handle` before
// the condition kernel is added, so `cond_args` may point at it.
static CUgraph device_loop(CUcontext ctx, const LoopKernels& k, CUgraphConditionalHandle* handle,
                           void** sweep_a, void** sweep_b, void** reduce_args, void** cond_args) {
    CUgraph graph;
    CHECK_CU(cuGraphCreate(&graph, 0));
    CHECK_CU(cuGraphConditionalHandleCreate(handle, graph, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNodeParams cp = {};
    cp.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    cp.conditional.handle = *handle;
    cp.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    cp.conditional.size = 1;
    cp.conditional.ctx = ctx;
    CUgraphNode loop;
    CHECK_CU(cuGraphAddNode(&loop, graph, nullptr, nullptr, 0, &cp));
    CUgraph body = cp.conditional.phGraph_out[0];
    CUgraphNode a = add_kernel(body, nullptr, 0, k.sweep, k.grid, k.block, sweep_a);
    CUgraphNode b = add_kernel(body, &a, 1, k.sweep, k.grid, k.block, sweep_b);
    CUgraphNode r = add_kernel(body, &b, 1, k.reduce, dim3(1), dim3(256), reduce_args);
    add_kernel(body, &r, 1, k.cond, dim3(1), dim3(1), cond_args);
    return graph;
}

int main(int argc, char** argv) {
    unsigned int n = argc > 1 ? std::atoi(argv[1]) : 512;
    float tol = argc > 2 ? std::atof(argv[2]) : 1e-4f;
    unsigned int max_sweeps = argc > 3 ? std::atoi(argv[3]) : 20000;
    unsigned int max_iters = max_sweeps / 2;
    CHECK_RT(cudaSetDevice(0));
    CHECK_RT(cudaFree(nullptr));
    CUcontext ctx;
    CHECK_CU(cuCtxGetCurrent(&ctx));
    cudaStream_t stream;
    CHECK_RT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    size_t cells = size_t(n) * n;
    dim3 block(32, 8), grid((n + 31) / 32, (n + 7) / 8);
    unsigned int blocks = grid.x * grid.y;
    std::vector<float> initial(cells, 0.0f);
    for (unsigned int x = 0; x < n; ++x) initial[x] = 1.0f;
    float *u, *u_new, *block_max, *residual;
    unsigned int* iterations;
    if (std::getenv("POOL")) {
        CHECK_RT(cudaMallocAsync(&u, cells * 4, stream));
        CHECK_RT(cudaMallocAsync(&u_new, cells * 4, stream));
        CHECK_RT(cudaMallocAsync(&block_max, blocks * 4, stream));
        CHECK_RT(cudaMallocAsync(&residual, 4, stream));
        CHECK_RT(cudaStreamSynchronize(stream));
    } else if (const char* gap = std::getenv("GAP")) {
        // Both grids carved from one allocation, `u_new` GAP bytes (a multiple of 256) past
        // the end of `u`: where one grid lies relative to the other.
        size_t bytes = size_t(std::atol(gap)) & ~size_t(255);
        char* base;
        CHECK_RT(cudaMalloc(&base, 2 * cells * 4 + bytes));
        u = reinterpret_cast<float*>(base);
        u_new = reinterpret_cast<float*>(base + cells * 4 + bytes);
        CHECK_RT(cudaMalloc(&block_max, blocks * 4));
        CHECK_RT(cudaMalloc(&residual, 4));
    } else {
        CHECK_RT(cudaMalloc(&u, cells * 4));
        CHECK_RT(cudaMalloc(&u_new, cells * 4));
        CHECK_RT(cudaMalloc(&block_max, blocks * 4));
        CHECK_RT(cudaMalloc(&residual, 4));
    }
    CHECK_RT(cudaMalloc(&iterations, 4));
    float* residual_host;
    CHECK_RT(cudaMallocHost(&residual_host, 4));

    CUfunction sweep = function_of(reinterpret_cast<const void*>(jacobi_sweep));
    CUfunction reduce = function_of(reinterpret_cast<const void*>(reduce_max));
    if (const char* ptx_path = std::getenv("JACOBI_PTX")) {
        CUmodule module;
        if (!load_module(ptx_path, &module)) return 1;
        CHECK_CU(cuModuleGetFunction(&sweep, module, "jacobi_sweep"));
        CHECK_CU(cuModuleGetFunction(&reduce, module, "reduce_max"));
    }
    CUfunction cond = function_of(reinterpret_cast<const void*>(keep_going));
    unsigned int nx = n, ny = n;
    void* sweep_a[] = {&nx, &ny, &u, &u_new, &block_max};
    void* sweep_b[] = {&nx, &ny, &u_new, &u, &block_max};
    void* reduce_args[] = {&blocks, &block_max, &residual};

    auto reset = [&] {
        CHECK_RT(cudaMemcpy(u, initial.data(), cells * 4, cudaMemcpyHostToDevice));
        CHECK_RT(cudaMemcpy(u_new, initial.data(), cells * 4, cudaMemcpyHostToDevice));
        CHECK_RT(cudaMemset(iterations, 0, 4));
        float big = 1e30f;
        CHECK_RT(cudaMemcpy(residual, &big, 4, cudaMemcpyHostToDevice));
    };

    // Device loop: one WHILE node whose body is sweep, sweep, reduce, condition.
    CUgraphConditionalHandle handle;
    void* cond_args[] = {&handle, &residual, &tol, &iterations, &max_iters};
    // COND_PTX: the library's loop test kernel instead of keep_going (arguments as
    // runtime/src/cuda/graph/conditional.rs passes them: the state word is host-mapped).
    unsigned int* state = nullptr;
    unsigned int* counter = nullptr;
    unsigned int first = 0;
    void* lib_args[] = {&handle, &residual, &tol, &state, &counter, &max_iters, &first};
    if (const char* cond_ptx = std::getenv("COND_PTX")) {
        CUmodule module;
        if (!load_module(cond_ptx, &module)) return 1;
        CHECK_CU(cuModuleGetFunction(&cond, module, "gp_loop_gt_f32"));
        CHECK_RT(cudaHostAlloc(&state, 8, cudaHostAllocMapped));
        CHECK_RT(cudaMalloc(&counter, 16));
        CHECK_RT(cudaMemset(counter, 0, 16));
    }
    const LoopKernels kernels = {sweep, reduce, cond, grid, block};
    CUgraph graph = device_loop(ctx, kernels, &handle, sweep_a, sweep_b, reduce_args,
                                state ? lib_args : cond_args);
    CUgraphExec exec;
    CHECK_CU(cuGraphInstantiate(&exec, graph, 0));

    // Host loop: one graph per sweep pair (sweep, sweep, reduce, copy back), tested on the host.
    CUgraph pair;
    CHECK_CU(cuGraphCreate(&pair, 0));
    CUgraphNode pa = add_kernel(pair, nullptr, 0, sweep, grid, block, sweep_a);
    CUgraphNode pb = add_kernel(pair, &pa, 1, sweep, grid, block, sweep_b);
    CUgraphNode pr = add_kernel(pair, &pb, 1, reduce, dim3(1), dim3(256), reduce_args);
    CUDA_MEMCPY3D copy = {};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = reinterpret_cast<CUdeviceptr>(residual);
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = residual_host;
    copy.WidthInBytes = 4;
    copy.Height = 1;
    copy.Depth = 1;
    CUgraphNode pc;
    CHECK_CU(cuGraphAddMemcpyNode(&pc, pair, &pr, 1, &copy, ctx));
    CUgraphExec pair_exec;
    CHECK_CU(cuGraphInstantiate(&pair_exec, pair, 0));

    for (int round = 0; round < 2; ++round) {  // the first round warms up
        reset();
        CHECK_CU(cuGraphUpload(exec, stream));
        CHECK_RT(cudaStreamSynchronize(stream));
        auto start = std::chrono::steady_clock::now();
        CHECK_CU(cuGraphLaunch(exec, stream));
        CHECK_RT(cudaStreamSynchronize(stream));
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              start)
                        .count();
        unsigned int iters;
        float res;
        if (state) {
            iters = state[0];  // the library's test marks the count there (keep_going's word is unused)
        } else {
            CHECK_RT(cudaMemcpy(&iters, iterations, 4, cudaMemcpyDeviceToHost));
        }
        CHECK_RT(cudaMemcpy(&res, residual, 4, cudaMemcpyDeviceToHost));
        if (round == 1)
            std::printf("device_while %u %.3f %.3f %.3e\n", 2 * iters, ms, 1e3 * ms / (2 * iters),
                        res);
        if (round == 1 && std::getenv("GAP"))
            std::printf("grids at %p and %p\n", (void*)u, (void*)u_new);

        reset();
        CHECK_CU(cuGraphUpload(pair_exec, stream));
        CHECK_RT(cudaStreamSynchronize(stream));
        start = std::chrono::steady_clock::now();
        unsigned int pairs = 0;
        do {
            CHECK_CU(cuGraphLaunch(pair_exec, stream));
            CHECK_RT(cudaStreamSynchronize(stream));
            ++pairs;
        } while (*residual_host > tol && pairs < max_iters);
        ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                 .count();
        if (round == 1)
            std::printf("host_loop %u %.3f %.3f %.3e\n", 2 * pairs, ms, 1e3 * ms / (2 * pairs),
                        *residual_host);
    }
    // REPEAT=N: N more device-loop solves, each as the language bench's runs are: new grids
    // from the stream-ordered pool (the previous ones freed), a new graph built, instantiated,
    // uploaded, launched once and destroyed. Prints each solve's time.
    if (const char* repeat = std::getenv("REPEAT")) {
        for (int k = 0, n_runs = std::atoi(repeat); k < n_runs; ++k) {
            float *ru, *ru_new, *rblock, *rres;
            unsigned int* riters;
            CHECK_RT(cudaMallocAsync(&ru, cells * 4, stream));
            CHECK_RT(cudaMallocAsync(&ru_new, cells * 4, stream));
            CHECK_RT(cudaMallocAsync(&rblock, blocks * 4, stream));
            CHECK_RT(cudaMallocAsync(&rres, 4, stream));
            CHECK_RT(cudaMallocAsync(&riters, 4, stream));
            CHECK_RT(cudaMemcpyAsync(ru, initial.data(), cells * 4, cudaMemcpyHostToDevice, stream));
            CHECK_RT(cudaMemcpyAsync(ru_new, initial.data(), cells * 4, cudaMemcpyHostToDevice, stream));
            CHECK_RT(cudaMemsetAsync(riters, 0, 4, stream));
            float big = 1e30f;
            CHECK_RT(cudaMemcpyAsync(rres, &big, 4, cudaMemcpyHostToDevice, stream));
            void* ra[] = {&nx, &ny, &ru, &ru_new, &rblock};
            void* rb[] = {&nx, &ny, &ru_new, &ru, &rblock};
            void* rr[] = {&blocks, &rblock, &rres};
            CUgraphConditionalHandle h;
            void* rc[] = {&h, &rres, &tol, &riters, &max_iters};
            const LoopKernels own = {sweep, reduce,
                                     function_of(reinterpret_cast<const void*>(keep_going)), grid,
                                     block};
            CUgraph g = device_loop(ctx, own, &h, ra, rb, rr, rc);
            CUgraphExec e;
            CHECK_CU(cuGraphInstantiate(&e, g, 0));
            CHECK_CU(cuGraphUpload(e, stream));
            CHECK_RT(cudaStreamSynchronize(stream));
            auto start = std::chrono::steady_clock::now();
            CHECK_CU(cuGraphLaunch(e, stream));
            CHECK_RT(cudaStreamSynchronize(stream));
            double ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start).count();
            unsigned int it;
            CHECK_RT(cudaMemcpy(&it, riters, 4, cudaMemcpyDeviceToHost));
            std::printf("repeat %d device_while %u %.3f %.3f\n", k, 2 * it, ms, 1e3 * ms / (2 * it));
            CHECK_CU(cuGraphExecDestroy(e));
            CHECK_CU(cuGraphDestroy(g));
            for (void* ptr : {(void*)ru, (void*)ru_new, (void*)rblock, (void*)rres, (void*)riters})
                CHECK_RT(cudaFreeAsync(ptr, stream));
            CHECK_RT(cudaStreamSynchronize(stream));
        }
    }
    return 0;
}
