// What the raw anchors share: error checks for the driver and runtime calls, a kernel's driver
// handle, and a kernel node added with driver calls. Included by jacobi_while.cu and cg.cu.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CU(call)                                                                    \
    do {                                                                                  \
        CUresult r_ = (call);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                         \
            const char* name_ = nullptr;                                                  \
            cuGetErrorName(r_, &name_);                                                   \
            std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #call,      \
                         name_ ? name_ : "?");                                            \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)
#define CHECK_RT(call)                                                                    \
    do {                                                                                  \
        cudaError_t r_ = (call);                                                          \
        if (r_ != cudaSuccess) {                                                          \
            std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #call,      \
                         cudaGetErrorString(r_));                                         \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

static CUfunction function_of(const void* symbol) {
    cudaFunction_t f;
    CHECK_RT(cudaGetFuncBySymbol(&f, symbol));
    return reinterpret_cast<CUfunction>(f);
}

static CUgraphNode add_kernel(CUgraph graph, const CUgraphNode* deps, size_t ndeps, CUfunction f,
                              dim3 grid, dim3 block, void** params) {
    CUDA_KERNEL_NODE_PARAMS p = {};
    p.func = f;
    p.gridDimX = grid.x;
    p.gridDimY = grid.y;
    p.gridDimZ = 1;
    p.blockDimX = block.x;
    p.blockDimY = block.y;
    p.blockDimZ = 1;
    p.kernelParams = params;
    CUgraphNode node;
    CHECK_CU(cuGraphAddKernelNode(&node, graph, deps, ndeps, &p));
    return node;
}
