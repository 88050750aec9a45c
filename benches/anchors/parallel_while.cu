// Parallel WHILE nodes fault on the driver: the reproducer behind runtime/src/cuda/graph/loops.rs.
// A graph of N loops with no edge between them, each `K0 -> WHILE { K }` (K0 sets the handle
// from a value, K counts and sets it again, three iterations where the value holds), built,
// launched once and destroyed, REPS times; raw CUDA runtime calls only.
//
// Build and run on the GPU machine (CUDA 12.4+):
//   nvcc -O3 -std=c++17 -arch=sm_90 -o parallel_while benches/anchors/parallel_while.cu
//   ./parallel_while N REPS MODE
// MODE 0: N parallel while loops; 1: do-while loops (handle default 1, no K0); 2: IF nodes
// instead of WHILE; 3: each loop's K0 after the loop before; 4: an edge from each WHILE node
// to the next (what loops.rs adds; the K0s stay parallel); 5: as 0, each body two kernels;
// 6: N graphs of one loop each, launched on N streams at once. With EMPTY=1 in the
// environment, each body of modes 0, 1 and 6 gets an empty node before its kernel. Prints "ok", a wrong count, or the
// CUDA error. On H100s, driver 580.159.04 (2026-11-27, four runs of 30 to 100 reps): modes 0
// and 1 failed with "unspecified launch failure" at some N from 4 up and at every N from 10
// up (a race: one N passed in one run and failed in the next); N = 2 and 3 never failed;
// modes 2, 3, 4 and 5 passed at every N up to 32 (an empty node before the kernel, EMPTY=1,
// did not help); mode 6 failed from N = 8 in one run, at N = 32 in another: separate graphs
// launched at once fault too. 2026-11-29, H100: mode 6 at N = 2, 3, 4 and 6, 200 reps each,
// passed. The library now chains every conditional node of a scope that holds a loop
// (runtime/src/cuda/graph/loops.rs) and orders launches of graphs with loops across streams
// (runtime/src/cuda/graph/lane.rs).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
__global__ void first(cudaGraphConditionalHandle h, const float* v, unsigned* counter) {
  counter[0] = 0; cudaGraphSetConditional(h, *v > 1.0f ? 1u : 0u);
}
__global__ void plain(cudaGraphConditionalHandle, const float*, unsigned* counter) { counter[0] = 3; }
__global__ void noop(cudaGraphConditionalHandle, const float*, unsigned*) {}
__global__ void again(cudaGraphConditionalHandle h, const float* v, unsigned* counter) {
  unsigned n = ++counter[0]; cudaGraphSetConditional(h, (*v > 1.0f && n < 3) ? 1u : 0u);
}
#define CK(x) do { cudaError_t e = (x); if (e) { std::printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); return 1; } } while (0)
// Mode 6: N graphs of one `K0 -> WHILE { K }` loop each, launched on N streams at once.
static int separate_graphs(int n, int reps) {
  for (int r = 0; r < reps; ++r) {
    float* v; unsigned* c; CK(cudaMalloc(&v, 4 * n)); CK(cudaMalloc(&c, 64 * n));
    float host[64]; for (int i = 0; i < n; ++i) host[i] = (i % 2) ? 2.0f : 0.5f;
    CK(cudaMemcpy(v, host, 4 * n, cudaMemcpyHostToDevice)); CK(cudaMemset(c, 0, 64 * n));
    cudaGraph_t g[64]; cudaGraphExec_t ex[64]; cudaStream_t st[64];
    for (int i = 0; i < n; ++i) {
      CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
      CK(cudaGraphCreate(&g[i], 0));
      cudaGraphConditionalHandle h; CK(cudaGraphConditionalHandleCreate(&h, g[i], 0, 0));
      float* vi = v + i; unsigned* ci = c + 16 * i; void* args[3] = {&h, &vi, &ci};
      cudaKernelNodeParams kp = {}; kp.func = (void*)first; kp.gridDim = 1; kp.blockDim = 1; kp.kernelParams = args;
      cudaGraphNode_t k0; CK(cudaGraphAddKernelNode(&k0, g[i], nullptr, 0, &kp));
      cudaGraphNodeParams cp = {}; cp.type = cudaGraphNodeTypeConditional;
      cp.conditional.handle = h; cp.conditional.type = cudaGraphCondTypeWhile; cp.conditional.size = 1;
      cudaGraphNode_t w; CK(cudaGraphAddNode(&w, g[i], &k0, nullptr, 1, &cp));
      kp.func = (void*)again;
      cudaGraphNode_t en = nullptr;
      if (getenv("EMPTY")) CK(cudaGraphAddEmptyNode(&en, cp.conditional.phGraph_out[0], nullptr, 0));
      cudaGraphNode_t k; CK(cudaGraphAddKernelNode(&k, cp.conditional.phGraph_out[0], en ? &en : nullptr, en ? 1 : 0, &kp));
      CK(cudaGraphInstantiate(&ex[i], g[i], 0));
    }
    for (int i = 0; i < n; ++i) CK(cudaGraphLaunch(ex[i], st[i]));
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < n; ++i) { CK(cudaGraphExecDestroy(ex[i])); CK(cudaGraphDestroy(g[i])); CK(cudaStreamDestroy(st[i])); }
    CK(cudaFree(v)); CK(cudaFree(c));
  }
  std::printf("n=%d reps=%d separate graphs: ok\n", n, reps);
  return 0;
}
int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8, reps = argc > 2 ? atoi(argv[2]) : 30, dowhile = argc > 3 ? atoi(argv[3]) : 0;
  cudaStream_t s; CK(cudaStreamCreate(&s));
  if (dowhile == 6) return separate_graphs(n, reps);
  for (int r = 0; r < reps; ++r) {
    float* v; unsigned* c; CK(cudaMalloc(&v, 4 * n)); CK(cudaMalloc(&c, 64 * n));
    float host[64]; for (int i = 0; i < n; ++i) host[i] = (i % 2) ? 2.0f : 0.5f;
    CK(cudaMemcpy(v, host, 4 * n, cudaMemcpyHostToDevice)); CK(cudaMemset(c, 0, 64 * n));
    cudaGraph_t g; CK(cudaGraphCreate(&g, 0)); cudaGraphNode_t prevw = nullptr;
    for (int i = 0; i < n; ++i) {
      cudaGraphConditionalHandle h;
      CK(cudaGraphConditionalHandleCreate(&h, g, dowhile == 1 ? 1 : 0, dowhile == 1 ? cudaGraphCondAssignDefault : 0));
      cudaGraphNode_t k0 = nullptr; int nd = 0;
      cudaGraphNode_t prev_deps[2]; int np = 0;
      if (dowhile == 3 && prevw) prev_deps[np++] = prevw;
      float* vi = v + i; unsigned* ci = c + 16 * i;
      void* args[3] = {&h, &vi, &ci};
      if (dowhile != 1) {
        cudaKernelNodeParams kp = {}; kp.func = (void*)first; kp.gridDim = 1; kp.blockDim = 1; kp.kernelParams = args;
        CK(cudaGraphAddKernelNode(&k0, g, prev_deps, np, &kp)); nd = 1;
      } else if (np) { k0 = prev_deps[0]; nd = 1; }
      cudaGraphNodeParams cp = {}; cp.type = cudaGraphNodeTypeConditional;
      cp.conditional.handle = h; cp.conditional.type = dowhile == 2 ? cudaGraphCondTypeIf : cudaGraphCondTypeWhile; cp.conditional.size = 1;
      cudaGraphNode_t w; CK(cudaGraphAddNode(&w, g, nd ? &k0 : nullptr, nullptr, nd, &cp));
      if (dowhile == 4 && prevw) CK(cudaGraphAddDependencies(g, &prevw, &w, nullptr, 1));
      cudaGraph_t body = cp.conditional.phGraph_out[0];
      prevw = w;
      cudaKernelNodeParams kp = {}; kp.func = dowhile == 2 ? (void*)plain : (void*)again; kp.gridDim = 1; kp.blockDim = 1; kp.kernelParams = args;
      cudaGraphNode_t first_in_body = nullptr;
      if (dowhile == 5) {  // a kernel before the one that sets the handle: a two-node body
        cudaKernelNodeParams np = kp; np.func = (void*)noop;
        CK(cudaGraphAddKernelNode(&first_in_body, body, nullptr, 0, &np));
      }
      if (getenv("EMPTY") && !first_in_body) CK(cudaGraphAddEmptyNode(&first_in_body, body, nullptr, 0));
      cudaGraphNode_t k; CK(cudaGraphAddKernelNode(&k, body, first_in_body ? &first_in_body : nullptr, first_in_body ? 1 : 0, &kp));
    }
    cudaGraphExec_t ex; CK(cudaGraphInstantiate(&ex, g, 0));
    CK(cudaGraphLaunch(ex, s)); CK(cudaStreamSynchronize(s));
    unsigned hc[16 * 64]; CK(cudaMemcpy(hc, c, 64 * n, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) { unsigned want = (i % 2) ? 3 : (dowhile == 1 ? 1 : 0); if (hc[16 * i] != want) { std::printf("rep %d loop %d: %u iterations, want %u\n", r, i, hc[16 * i], want); } }
    CK(cudaGraphExecDestroy(ex)); CK(cudaGraphDestroy(g)); CK(cudaFree(v)); CK(cudaFree(c));
  }
  std::printf("n=%d reps=%d dowhile=%d: ok\n", n, reps, dowhile);
  return 0;
}
