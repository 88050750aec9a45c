// The raw C++ anchor of the `cg` example: the same conjugate gradient (the example's own
// kernels, included below) to the same tolerance, built with driver calls two ways:
//   device_while  one graph: the setup, then a conditional WHILE node whose body is one CG
//                 iteration and a condition kernel (what `cg` builds with the macro);
//   host_loop     one graph per iteration, `rr` copied back to pinned memory and tested on
//                 the host after each launch (as NVIDIA's conjugateGradientCudaGraphs drives
//                 its captured iteration).
// Prints one line per variant, `variant iterations time_ms us_per_iteration rr`, for
// docs/PERFORMANCE.md; run the `cg` example in the same call for the macro's time.
//
// Build and run on the GPU machine (CUDA 12.4+ driver and toolkit):
//   nvcc -O3 -arch=sm_90 -o cg_anchor benches/anchors/cg.cu -lcuda
//   ./cg_anchor 512 512 1e-8 20000
// Arguments: nx, ny, relative tolerance, maximum iterations.

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../examples/kernels/cg.cu"

#include "raw_graph.cuh"

// Keeps looping while rr > tol2 and fewer than `max_iters` iterations ran; counts them.
__global__ void keep_going(cudaGraphConditionalHandle handle, const double* rr, double tol2,
                           unsigned int* iterations, unsigned int max_iters) {
    unsigned int done = ++*iterations;
    cudaGraphSetConditional(handle, (*rr > tol2 && done < max_iters) ? 1 : 0);
}

static CUgraphNode add_zero(CUgraph graph, const CUgraphNode* deps, size_t ndeps, CUcontext ctx,
                            double* ptr, size_t doubles) {
    CUDA_MEMSET_NODE_PARAMS p = {};
    p.dst = reinterpret_cast<CUdeviceptr>(ptr);
    p.elementSize = 4;
    p.width = 2 * doubles;
    p.height = 1;
    p.value = 0;
    CUgraphNode node;
    CHECK_CU(cuGraphAddMemsetNode(&node, graph, deps, ndeps, &p, ctx));
    return node;
}

static CUgraphNode add_copy(CUgraph graph, const CUgraphNode* deps, size_t ndeps, CUcontext ctx,
                            void* dst, bool dst_host, const void* src, size_t bytes) {
    CUDA_MEMCPY3D c = {};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = reinterpret_cast<CUdeviceptr>(src);
    if (dst_host) {
        c.dstMemoryType = CU_MEMORYTYPE_HOST;
        c.dstHost = dst;
    } else {
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = reinterpret_cast<CUdeviceptr>(dst);
    }
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    CUgraphNode node;
    CHECK_CU(cuGraphAddMemcpyNode(&node, graph, deps, ndeps, &c, ctx));
    return node;
}

int main(int argc, char** argv) {
    unsigned int nx = argc > 1 ? std::atoi(argv[1]) : 512;
    unsigned int ny = argc > 2 ? std::atoi(argv[2]) : 512;
    double tol = argc > 3 ? std::atof(argv[3]) : 1e-8;
    unsigned int max_iters = argc > 4 ? std::atoi(argv[4]) : 20000;
    CHECK_RT(cudaSetDevice(0));
    CHECK_RT(cudaFree(nullptr));
    CUcontext ctx;
    CHECK_CU(cuCtxGetCurrent(&ctx));
    cudaStream_t stream;
    CHECK_RT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    unsigned int n = nx * ny;
    double tol2 = tol * tol * n;  // |b|^2 = n for the unit source
    dim3 grid2((nx + 31) / 32, (ny + 7) / 8), block2(32, 8);
    dim3 dot_grid(std::min((n + 255) / 256, 1024u)), grid1((n + 255) / 256), block1(256);
    std::vector<double> ones(n, 1.0);
    double *b, *x, *r, *p, *ap, *rr, *rr_new, *pap;
    unsigned int* iterations;
    for (double** v : {&b, &x, &r, &p, &ap}) CHECK_RT(cudaMalloc(v, size_t(n) * 8));
    for (double** v : {&rr, &rr_new, &pap}) CHECK_RT(cudaMalloc(v, 8));
    CHECK_RT(cudaMalloc(&iterations, 4));
    CHECK_RT(cudaMemcpy(b, ones.data(), size_t(n) * 8, cudaMemcpyHostToDevice));
    double* rr_host;
    CHECK_RT(cudaMallocHost(&rr_host, 8));

    CUfunction apply = function_of(reinterpret_cast<const void*>(poisson_apply));
    CUfunction dotf = function_of(reinterpret_cast<const void*>(dot));
    CUfunction xr = function_of(reinterpret_cast<const void*>(update_xr));
    CUfunction pf = function_of(reinterpret_cast<const void*>(update_p));
    CUfunction cond = function_of(reinterpret_cast<const void*>(keep_going));
    void* apply_args[] = {&nx, &ny, &p, &ap};
    void* dot_rr[] = {&n, &r, &r, &rr};
    void* dot_pap[] = {&n, &p, &ap, &pap};
    void* dot_rr_new[] = {&n, &r, &r, &rr_new};
    void* xr_args[] = {&n, &rr, &pap, &p, &ap, &x, &r};
    void* p_args[] = {&n, &rr, &rr_new, &r, &p};

    // One CG iteration into `g` after `dep`: the last node.
    auto iteration = [&](CUgraph g, CUgraphNode dep, bool has_dep) {
        const CUgraphNode* d = has_dep ? &dep : nullptr;
        CUgraphNode a = add_kernel(g, d, has_dep ? 1 : 0, apply, grid2, block2, apply_args);
        CUgraphNode z = add_zero(g, &a, 1, ctx, pap, 1);
        CUgraphNode dp = add_kernel(g, &z, 1, dotf, dot_grid, block1, dot_pap);
        CUgraphNode u = add_kernel(g, &dp, 1, xr, grid1, block1, xr_args);
        CUgraphNode z2 = add_zero(g, &u, 1, ctx, rr_new, 1);
        CUgraphNode dr = add_kernel(g, &z2, 1, dotf, dot_grid, block1, dot_rr_new);
        CUgraphNode up = add_kernel(g, &dr, 1, pf, grid1, block1, p_args);
        return add_copy(g, &up, 1, ctx, rr, false, rr_new, 8);
    };

    // Device loop: setup, then WHILE { iteration; condition }.
    CUgraph graph;
    CHECK_CU(cuGraphCreate(&graph, 0));
    CUgraphNode s0 = add_zero(graph, nullptr, 0, ctx, x, n);
    CUgraphNode s1 = add_copy(graph, &s0, 1, ctx, r, false, b, size_t(n) * 8);
    CUgraphNode s2 = add_copy(graph, &s1, 1, ctx, p, false, b, size_t(n) * 8);
    CUgraphNode s3 = add_zero(graph, &s2, 1, ctx, rr, 1);
    CUgraphNode s4 = add_kernel(graph, &s3, 1, dotf, dot_grid, block1, dot_rr);
    CUgraphConditionalHandle handle;
    CHECK_CU(cuGraphConditionalHandleCreate(&handle, graph, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNodeParams cp = {};
    cp.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    cp.conditional.handle = handle;
    cp.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    cp.conditional.size = 1;
    cp.conditional.ctx = ctx;
    CUgraphNode loop;
    CHECK_CU(cuGraphAddNode(&loop, graph, &s4, nullptr, 1, &cp));
    CUgraph body = cp.conditional.phGraph_out[0];
    CUgraphNode last = iteration(body, CUgraphNode{}, false);
    void* cond_args[] = {&handle, &rr, &tol2, &iterations, &max_iters};
    add_kernel(body, &last, 1, cond, dim3(1), dim3(1), cond_args);
    CUgraphExec exec;
    CHECK_CU(cuGraphInstantiate(&exec, graph, 0));

    // Host loop: one graph per iteration, rr copied back and tested on the host.
    CUgraph one;
    CHECK_CU(cuGraphCreate(&one, 0));
    CUgraphNode ol = iteration(one, CUgraphNode{}, false);
    add_copy(one, &ol, 1, ctx, rr_host, true, rr, 8);
    CUgraphExec one_exec;
    CHECK_CU(cuGraphInstantiate(&one_exec, one, 0));

    for (int round = 0; round < 2; ++round) {  // the first round warms up
        // The WHILE handle starts at 1 each launch: the first test is the condition kernel's
        // after one iteration, as a do-while; the example's `while` tests first, which for a
        // nonzero b costs nothing more here.
        CHECK_RT(cudaMemset(iterations, 0, 4));
        CHECK_CU(cuGraphUpload(exec, stream));
        CHECK_RT(cudaStreamSynchronize(stream));
        auto start = std::chrono::steady_clock::now();
        CHECK_CU(cuGraphLaunch(exec, stream));
        CHECK_RT(cudaStreamSynchronize(stream));
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              start)
                        .count();
        unsigned int iters;
        double final_rr;
        CHECK_RT(cudaMemcpy(&iters, iterations, 4, cudaMemcpyDeviceToHost));
        CHECK_RT(cudaMemcpy(&final_rr, rr, 8, cudaMemcpyDeviceToHost));
        if (round == 1)
            std::printf("device_while %u %.3f %.3f %.3e\n", iters, ms, 1e3 * ms / iters, final_rr);

        // The setup eagerly, then the loop.
        CHECK_RT(cudaMemsetAsync(x, 0, size_t(n) * 8, stream));
        CHECK_RT(cudaMemcpyAsync(r, b, size_t(n) * 8, cudaMemcpyDeviceToDevice, stream));
        CHECK_RT(cudaMemcpyAsync(p, b, size_t(n) * 8, cudaMemcpyDeviceToDevice, stream));
        CHECK_RT(cudaMemsetAsync(rr, 0, 8, stream));
        CHECK_CU(cuLaunchKernel(dotf, dot_grid.x, 1, 1, 256, 1, 1, 0, stream, dot_rr, nullptr));
        CHECK_CU(cuGraphUpload(one_exec, stream));
        CHECK_RT(cudaStreamSynchronize(stream));
        start = std::chrono::steady_clock::now();
        unsigned int done = 0;
        do {
            CHECK_CU(cuGraphLaunch(one_exec, stream));
            CHECK_RT(cudaStreamSynchronize(stream));
            ++done;
        } while (*rr_host > tol2 && done < max_iters);
        ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                 .count();
        if (round == 1)
            std::printf("host_loop %u %.3f %.3f %.3e\n", done, ms, 1e3 * ms / done, *rr_host);
    }
    return 0;
}
