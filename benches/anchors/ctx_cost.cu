// What making a context current costs: per call (set, against a read and a compare), and
// inside a 100-node graph build (a set or a read before each cuGraphAddKernelNode). The
// measurement behind Context::bind (runtime/src/cuda/context.rs).
//
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 -o ctx_cost benches/anchors/ctx_cost.cu -lcuda
//   ./ctx_cost
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdlib>
__global__ void add(unsigned n, float v, float* d) { if (threadIdx.x < n) d[threadIdx.x] += v; }
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  cudaSetDevice(0); cudaFree(nullptr);
  CUcontext ctx; cuCtxGetCurrent(&ctx);
  float* d; cudaMalloc(&d, 128);
  CUfunction f = nullptr; cudaError_t fe = cudaGetFuncBySymbol((cudaFunction_t*)&f, (const void*)add);
  std::printf("function %p (rc %d)\n", (void*)f, (int)fe);
  const int N = 1000000;
  std::vector<double> set, get;
  for (int r = 0; r < 7; ++r) {
    auto a = clk::now(); for (int i = 0; i < N; ++i) cuCtxSetCurrent(ctx); auto b = clk::now();
    set.push_back(us(a, b) * 1000 / N);
    a = clk::now(); for (int i = 0; i < N; ++i) { CUcontext c; cuCtxGetCurrent(&c); if (c != ctx) cuCtxSetCurrent(ctx); } b = clk::now();
    get.push_back(us(a, b) * 1000 / N);
  }
  std::sort(set.begin(), set.end()); std::sort(get.begin(), get.end());
  std::printf("ns per cuCtxSetCurrent(same): median %.1f (min %.1f max %.1f)\n", set[3], set[0], set[6]);
  std::printf("ns per cuCtxGetCurrent+compare: median %.1f (min %.1f max %.1f)\n", get[3], get[0], get[6]);
  // 100-node chain builds, 20 per timing, 3 variants interleaved.
  const char* names[3] = {"raw build", "+cuCtxSetCurrent per node", "+cuCtxGetCurrent per node"};
  std::vector<double> t[3];
  unsigned n = 32; float v = 1; void* params[3] = {&n, &v, &d};
  auto build = [&](int variant) -> CUresult {
    CUgraph g; CUresult rc = cuGraphCreate(&g, 0); if (rc) return rc;
    CUgraphNode last = nullptr;
    for (int i = 0; i < 100; ++i) {
      if (variant == 1) cuCtxSetCurrent(ctx);
      if (variant == 2) { CUcontext c; cuCtxGetCurrent(&c); if (c != ctx) cuCtxSetCurrent(ctx); }
      CUDA_KERNEL_NODE_PARAMS p = {}; p.func = f; p.gridDimX = p.gridDimY = p.gridDimZ = 1;
      p.blockDimX = 32; p.blockDimY = p.blockDimZ = 1; p.kernelParams = params;
      CUgraphNode node; rc = cuGraphAddKernelNode(&node, g, last ? &last : nullptr, last ? 1 : 0, &p);
      if (rc) return rc; last = node;
    }
    CUgraphExec e; rc = cuGraphInstantiateWithFlags(&e, g, 0); if (rc) return rc;
    cuGraphExecDestroy(e); cuGraphDestroy(g); return CUDA_SUCCESS;
  };
  for (int r = 0; r < 11; ++r) for (int var = 0; var < 3; ++var) {
    auto a = clk::now(); CUresult rc = CUDA_SUCCESS;
    for (int k = 0; k < 20 && !rc; ++k) rc = build(var);
    auto b = clk::now();
    if (rc) { if (r == 0) std::printf("%s: CUresult %d\n", names[var], (int)rc); continue; }
    if (r > 0) t[var].push_back(us(a, b) / 20);
  }
  for (int var = 0; var < 3; ++var) { if (t[var].empty()) continue; auto v2 = t[var]; std::sort(v2.begin(), v2.end());
    std::printf("| %s | %.2f us | min %.2f max %.2f | %.3f |\n", names[var], v2[v2.size()/2], v2.front(), v2.back(), v2[v2.size()/2] / [&]{auto w=t[0]; std::sort(w.begin(), w.end()); return w[w.size()/2];}()); }
  return 0;
}
