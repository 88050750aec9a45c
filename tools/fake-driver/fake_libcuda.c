// A do-nothing CUDA driver, for timing and profiling the library's own CPU work without a
// GPU: every entry point succeeds at once, handles are fresh counters, device memory is
// addresses nobody touches, host-mapped memory is calloc'd. Nothing runs and nothing is
// copied, so results are meaningless; only the time spent outside the driver is real.
//
//   cc -O2 -shared -fPIC -o target/libfake_cuda.so tools/fake-driver/fake_libcuda.c -ldl
//   GPU_PIPELINE_LIBCUDA=$PWD/target/libfake_cuda.so cargo bench -p gpu-pipeline --bench build_cost
//   GPU_PIPELINE_LIBCUDA=... valgrind --tool=callgrind target/release/deps/build_cost-* runtime 200
//
// Entry points not defined here resolve to one that returns CUDA_SUCCESS and writes nothing.
// `cuFuncGetParamInfo` knows the parameters of the test kernels `add_scalar`, `saxpy` and
// `empty` (runtime/kernels/test_kernels.cu) only.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
typedef int CUresult;
static uintptr_t next_handle = 0x100000;
static void* H(void) { return (void*)(next_handle += 0x100); }
static __thread void* current_ctx;
static int generic(void) { return 0; }
CUresult fake_cuInit(unsigned f) { return 0; }
CUresult fake_cuDriverGetVersion(int* v) { *v = 13000; return 0; }
CUresult fake_cuDeviceGetCount(int* c) { *c = 1; return 0; }
CUresult fake_cuDeviceGet(int* d, int o) { *d = o; return 0; }
CUresult fake_cuDeviceGetName(char* n, int len, int d) { strncpy(n, "Fake GPU", len); return 0; }
CUresult fake_cuDeviceTotalMem(size_t* b, int d) { *b = 80ull << 30; return 0; }
CUresult fake_cuDeviceGetAttribute(int* v, int a, int d) {
  switch (a) {
    case 1: *v = 1024; break; case 2: *v = 1024; break; case 3: *v = 1024; break; case 4: *v = 64; break;
    case 5: *v = 2147483647; break; case 6: *v = 65535; break; case 7: *v = 65535; break;
    case 8: *v = 49152; break; case 10: *v = 32; break; case 16: *v = 132; break;
    case 75: *v = 9; break; case 76: *v = 0; break; case 97: *v = 232448; break;
    default: *v = 1;
  }
  return 0;
}
CUresult fake_cuDeviceGetDefaultMemPool(void** p, int d) { *p = H(); return 0; }
static void* primary = (void*)0x5000;
CUresult fake_cuDevicePrimaryCtxRetain(void** c, int d) { *c = primary; return 0; }
CUresult fake_cuDevicePrimaryCtxGetState(int d, unsigned* f, int* a) { *f = 0; *a = 0; return 0; }
CUresult fake_cuCtxSetCurrent(void* c) { current_ctx = c; return 0; }
CUresult fake_cuCtxGetCurrent(void** c) { *c = current_ctx; return 0; }
CUresult fake_cuCtxGetFlags(unsigned* f) { *f = 0; return 0; }
CUresult fake_cuCtxGetStreamPriorityRange(int* l, int* g) { *l = 0; *g = -5; return 0; }
CUresult fake_cuStreamCreate(void** s, unsigned f) { *s = H(); return 0; }
CUresult fake_cuStreamCreateWithPriority(void** s, unsigned f, int p) { *s = H(); return 0; }
CUresult fake_cuStreamGetId(void* s, unsigned long long* id) { *id = (uintptr_t)s; return 0; }
CUresult fake_cuStreamGetFlags(void* s, unsigned* f) { *f = 1; return 0; }
CUresult fake_cuStreamGetPriority(void* s, int* p) { *p = 0; return 0; }
CUresult fake_cuStreamGetDevice(void* s, int* d) { *d = 0; return 0; }
CUresult fake_cuStreamGetCaptureInfo(void* s, int* status, unsigned long long* id, void** g, void** deps, size_t* n) {
  if (status) *status = 0;
  if (id) *id = 0;
  if (g) *g = 0;
  if (deps) *deps = 0;
  if (n) *n = 0;
  return 0;
}
CUresult fake_cuEventCreate(void** e, unsigned f) { *e = H(); return 0; }
static uintptr_t next_dev = 0x700000000000ull;
CUresult fake_cuMemAlloc(uintptr_t* p, size_t b) { *p = next_dev; next_dev += (b + 0xffff) & ~0xffffull; return 0; }
CUresult fake_cuMemAllocAsync(uintptr_t* p, size_t b, void* s) { return fake_cuMemAlloc(p, b); }
CUresult fake_cuMemAllocFromPoolAsync(uintptr_t* p, size_t b, void* pool, void* s) { return fake_cuMemAlloc(p, b); }
CUresult fake_cuMemAllocManaged(void** p, size_t b, unsigned f) { *p = calloc(1, b ? b : 1); return 0; }
CUresult fake_cuMemHostAlloc(void** p, size_t b, unsigned f) { *p = calloc(1, b ? b : 1); return 0; }
CUresult fake_cuMemFreeHost(void* p) { free(p); return 0; }
CUresult fake_cuMemHostGetDevicePointer(void** d, void* p, unsigned f) { *d = p; return 0; }
CUresult fake_cuMemGetInfo(size_t* f, size_t* t) { *f = 70ull << 30; *t = 80ull << 30; return 0; }
CUresult fake_cuModuleLoadDataEx(void** m, const void* img, unsigned n, void* o, void* v) { *m = H(); return 0; }
struct fn { char name[64]; };
CUresult fake_cuModuleGetFunction(void** f, void* m, const char* name) {
  struct fn* x = calloc(1, sizeof *x); strncpy(x->name, name, 63); *f = x; return 0; }
CUresult fake_cuFuncGetAttribute(int* v, int a, void* f) {
  switch (a) { case 0: *v = 1024; break; case 8: *v = 49152; break; default: *v = 0; } return 0; }
CUresult fake_cuFuncGetParamInfo(void* f, size_t i, size_t* off, size_t* size) {
  const char* n = ((struct fn*)f)->name;
  static const size_t add[] = {4, 4, 8}, saxpy[] = {4, 4, 8, 8};
  const size_t* s = 0; size_t k = 0;
  if (!strcmp(n, "add_scalar")) { s = add; k = 3; }
  else if (!strcmp(n, "saxpy")) { s = saxpy; k = 4; }
  else if (!strcmp(n, "empty")) { k = 0; }
  else { k = 0; }
  if (i >= k) return 1;
  size_t o = 0; for (size_t j = 0; j < i; ++j) o += s[j];
  if (s[i] == 8 && o % 8) o += 4;
  *off = o; *size = s[i]; return 0;
}
CUresult fake_cuGraphCreate(void** g, unsigned f) { *g = H(); return 0; }
CUresult fake_cuGraphAddKernelNode(void** n, void* g, void* d, size_t k, const void* p) { *n = H(); return 0; }
CUresult fake_cuGraphAddEmptyNode(void** n, void* g, void* d, size_t k) { *n = H(); return 0; }
CUresult fake_cuGraphAddMemsetNode(void** n, void* g, void* d, size_t k, const void* p, void* c) { *n = H(); return 0; }
CUresult fake_cuGraphAddMemcpyNode(void** n, void* g, void* d, size_t k, const void* p, void* c) { *n = H(); return 0; }
CUresult fake_cuGraphAddBatchMemOpNode(void** n, void* g, void* d, size_t k, const void* p) { *n = H(); return 0; }
CUresult fake_cuGraphAddHostNode(void** n, void* g, void* d, size_t k, const void* p) { *n = H(); return 0; }
CUresult fake_cuGraphInstantiateWithFlags(void** e, void* g, unsigned long long f) { *e = H(); return 0; }
CUresult fake_cuGetProcAddress_v2(const char* sym, void** pfn, int v, unsigned long long flags, int* status) {
  char name[128]; snprintf(name, sizeof name, "fake_%s", sym);
  static void* self;
  if (!self) { Dl_info info; dladdr((void*)generic, &info); self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD); }
  void* f = dlsym(self, name);
  *pfn = f ? f : (void*)generic;
  if (status) *status = 0;
  return 0;
}
CUresult cuGetProcAddress_v2(const char* sym, void** pfn, int v, unsigned long long flags, int* status) {
  return fake_cuGetProcAddress_v2(sym, pfn, v, flags, status);
}
CUresult cuInit(unsigned f) { return 0; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
