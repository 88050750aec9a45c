// A do-nothing CUDA driver, for timing and profiling the library's own CPU work without a
// GPU: every entry point succeeds at once, handles are fresh counters, device memory is
// addresses nobody touches, host-mapped memory is calloc'd. Nothing runs and nothing is
// copied, so results are meaningless; only the time spent outside the driver is real.
//
//   cc -O2 -shared -fPIC -o target/libfake_cuda.so tools/fake-driver/fake_libcuda.c -ldl
//   GPU_PIPELINE_LIBCUDA=$PWD/target/libfake_cuda.so cargo bench -p gpu-pipeline --bench build_cost
//   GPU_PIPELINE_LIBCUDA=... valgrind --tool=callgrind target/release/deps/build_cost-* runtime 200
//
// Kernels' parameter sizes (what `Kernel::typed` checks) are read from the PTX text a module
// is loaded from. Conditional nodes get body graphs, but no loop ever runs, so anything that
// waits for a device loop's count fails on it. The raw baselines of the benches find the few
// entry points they look up by name exported as well. Entry points not defined here resolve
// to one that returns CUDA_SUCCESS and writes nothing.
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
// Counts of the calls that cost a real driver most, for tests of how many a path makes
// (tests/tests/driver_calls.rs): with FAKE_CUDA_COUNTS naming a file, the process writes
// `name count` lines there at exit. `unoverlapped_zeroing` counts the waits for the legacy
// stream that follow a cuMemsetD8 with no graph instantiated or updated in between: a memset
// the host waited for at once, rather than while a graph was built.
enum { C_HOST_ALLOC, C_FREE_HOST, C_MEM_ALLOC, C_MEM_FREE, C_MEMSET, C_LEGACY_SYNC,
       C_UNOVERLAPPED, C_INSTANTIATE, C_CTX_SYNC, C_MODULE_LOAD, C_COUNTS };
static const char* count_names[C_COUNTS] = {
  "cuMemHostAlloc", "cuMemFreeHost", "cuMemAlloc", "cuMemFree", "cuMemsetD8",
  "legacy_stream_sync", "unoverlapped_zeroing", "cuGraphInstantiate", "cuCtxSynchronize",
  "cuModuleLoadData"};
static unsigned long counts[C_COUNTS];
static int memset_pending;
__attribute__((destructor)) static void write_counts(void) {
  const char* path = getenv("FAKE_CUDA_COUNTS");
  FILE* f = path && *path ? fopen(path, "w") : NULL;
  if (!f) return;
  for (int i = 0; i < C_COUNTS; i++) fprintf(f, "%s %lu\n", count_names[i], counts[i]);
  fclose(f);
}
CUresult fake_cuMemsetD8(uintptr_t p, unsigned char v, size_t n) { counts[C_MEMSET]++; memset_pending = 1; return 0; }
CUresult fake_cuStreamSynchronize(void* s) {
  if (!s) {
    counts[C_LEGACY_SYNC]++;
    if (memset_pending) counts[C_UNOVERLAPPED]++;
    memset_pending = 0;
  }
  return 0;
}
// With FAKE_CUDA_FAIL_CTX_SYNC set (read at each call), a context synchronize fails as one
// does while another thread captures in global mode (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED):
// the context lives on, and work may still run.
CUresult fake_cuCtxSynchronize(void) {
  counts[C_CTX_SYNC]++;
  const char* fail = getenv("FAKE_CUDA_FAIL_CTX_SYNC");
  return fail && *fail ? 900 : 0;
}
CUresult fake_cuMemFree(uintptr_t p) { counts[C_MEM_FREE]++; return 0; }
static uintptr_t next_dev = 0x700000000000ull;
CUresult fake_cuMemAlloc(uintptr_t* p, size_t b) { counts[C_MEM_ALLOC]++; *p = next_dev; next_dev += (b + 0xffff) & ~0xffffull; return 0; }
CUresult fake_cuMemAllocAsync(uintptr_t* p, size_t b, void* s) { counts[C_MEM_ALLOC]--; return fake_cuMemAlloc(p, b); }
CUresult fake_cuMemAllocFromPoolAsync(uintptr_t* p, size_t b, void* pool, void* s) { counts[C_MEM_ALLOC]--; return fake_cuMemAlloc(p, b); }
CUresult fake_cuMemAllocManaged(void** p, size_t b, unsigned f) { *p = calloc(1, b ? b : 1); return 0; }
CUresult fake_cuMemHostAlloc(void** p, size_t b, unsigned f) { counts[C_HOST_ALLOC]++; *p = calloc(1, b ? b : 1); return 0; }
CUresult fake_cuMemFreeHost(void* p) { counts[C_FREE_HOST]++; free(p); return 0; }
CUresult fake_cuMemHostGetDevicePointer(void** d, void* p, unsigned f) { *d = p; return 0; }
CUresult fake_cuMemGetInfo(size_t* f, size_t* t) { *f = 70ull << 30; *t = 80ull << 30; return 0; }
// Kernels and their parameter sizes, read from the PTX text a module is loaded from (the
// `.entry name(` lines and the `.param` lines that follow), so `cuFuncGetParamInfo` answers
// for any kernel of any PTX module.
struct fn { char name[128]; size_t count; size_t size[64]; };
static struct fn kernels[4096];
static size_t kernel_count;

// The size of one `.param` declaration: its type's width, or an array's length in bytes.
static size_t param_size(const char* line) {
  const char* open = strchr(line, '[');
  if (open) return (size_t)strtoul(open + 1, 0, 10);
  for (const char* t = strchr(line + 1, '.'); t; t = strchr(t + 1, '.')) {
    if (!strncmp(t, ".align", 6) || !strncmp(t, ".ptr", 4) || !strncmp(t, ".global", 7)) continue;
    int bits = atoi(t + 2);  // .u32, .f64, .b8, ...
    return bits >= 8 ? (size_t)bits / 8 : 4;
  }
  return 4;
}

static void read_kernels(const char* ptx) {
  for (const char* at = ptx; (at = strstr(at, ".entry ")) != 0 && kernel_count < 4096;) {
    struct fn* k = &kernels[kernel_count++];
    at += 7;
    size_t len = strcspn(at, "( \t\n");
    if (len > 127) len = 127;
    memcpy(k->name, at, len);
    k->name[len] = 0;
    const char* close = strchr(at, ')');
    for (const char* p = strstr(at, ".param"); p && close && p < close && k->count < 64;
         p = strstr(p + 6, ".param")) {
      char line[256];
      size_t n = strcspn(p, ",)\n");
      if (n > 255) n = 255;
      memcpy(line, p, n);
      line[n] = 0;
      k->size[k->count++] = param_size(line);
    }
  }
}

CUresult fake_cuModuleLoadDataEx(void** m, const void* img, unsigned n, void* o, void* v) {
  counts[C_MODULE_LOAD]++;
  read_kernels((const char*)img);
  *m = H();
  return 0;
}
static struct fn unknown_kernel = { "unknown", 0, {0} };
CUresult fake_cuModuleGetFunction(void** f, void* m, const char* name) {
  for (size_t i = kernel_count; i-- > 0;) {
    if (!strcmp(kernels[i].name, name)) { *f = &kernels[i]; return 0; }
  }
  *f = &unknown_kernel;
  return 0;
}
CUresult fake_cuFuncGetAttribute(int* v, int a, void* f) {
  switch (a) { case 0: *v = 1024; break; case 8: *v = 49152; break; default: *v = 0; } return 0; }
CUresult fake_cuFuncGetParamInfo(void* f, size_t i, size_t* off, size_t* size) {
  const struct fn* k = f;
  if (i >= k->count) return 1;  // CUDA_ERROR_INVALID_VALUE: past the last parameter
  size_t o = 0;
  for (size_t j = 0; j <= i; ++j) {
    size_t align = k->size[j] >= 8 ? 8 : k->size[j];
    o = (o + align - 1) / align * align;
    if (j < i) o += k->size[j];
  }
  *off = o;
  *size = k->size[i];
  return 0;
}
CUresult fake_cuGraphCreate(void** g, unsigned f) { *g = H(); return 0; }
CUresult fake_cuGraphAddKernelNode(void** n, void* g, void* d, size_t k, const void* p) { *n = H(); return 0; }
CUresult fake_cuGraphAddEmptyNode(void** n, void* g, void* d, size_t k) { *n = H(); return 0; }
CUresult fake_cuGraphAddMemsetNode(void** n, void* g, void* d, size_t k, const void* p, void* c) { *n = H(); return 0; }
CUresult fake_cuGraphAddMemcpyNode(void** n, void* g, void* d, size_t k, const void* p, void* c) { *n = H(); return 0; }
CUresult fake_cuGraphAddBatchMemOpNode(void** n, void* g, void* d, size_t k, const void* p) { *n = H(); return 0; }
CUresult fake_cuGraphAddHostNode(void** n, void* g, void* d, size_t k, const void* p) { *n = H(); return 0; }
// A conditional node (`CUgraphNodeParams`: the type at byte 0, the conditional member at 16:
// handle, type, size, then the out-pointer to the bodies at 32) gets fresh body graphs.
CUresult fake_cuGraphAddNode(void** n, void* g, void* d, void* edges, size_t k, void* params) {
  unsigned char* p = params;
  if (*(int*)p == 13) {  // CU_GRAPH_NODE_TYPE_CONDITIONAL
    unsigned size = *(unsigned*)(p + 28);
    void** bodies = calloc(size ? size : 1, sizeof(void*));
    for (unsigned i = 0; i < size; ++i) bodies[i] = H();
    *(void***)(p + 32) = bodies;
  }
  *n = H();
  return 0;
}
CUresult fake_cuGraphConditionalHandleCreate(unsigned long long* h, void* g, void* c, unsigned v, unsigned f) {
  *h = (unsigned long long)(uintptr_t)H();
  return 0;
}
CUresult fake_cuGraphInstantiateWithFlags(void** e, void* g, unsigned long long f) { counts[C_INSTANTIATE]++; memset_pending = 0; *e = H(); return 0; }
CUresult fake_cuGraphExecUpdate(void* e, void* g, void* info) { memset_pending = 0; return 0; }
CUresult fake_cuModuleLoadData(void** m, const void* img) { return fake_cuModuleLoadDataEx(m, img, 0, 0, 0); }
CUresult fake_cuStreamEndCapture(void* s, void** g) { *g = H(); return 0; }

// The exports that benchmarks' raw baselines look up by name (benches/raw_driver.rs,
// examples/src/jacobi/anchor.rs, tests/benches/pipeline.rs), beside cuGetProcAddress.
#define EXPORT(name, impl, params, args) \
  CUresult name params { return impl args; }
EXPORT(cuCtxSetCurrent, fake_cuCtxSetCurrent, (void* c), (c))
EXPORT(cuGraphCreate, fake_cuGraphCreate, (void** g, unsigned f), (g, f))
EXPORT(cuGraphAddKernelNode_v2, fake_cuGraphAddKernelNode, (void** n, void* g, void* d, size_t k, const void* p), (n, g, d, k, p))
EXPORT(cuGraphInstantiateWithFlags, fake_cuGraphInstantiateWithFlags, (void** e, void* g, unsigned long long f), (e, g, f))
EXPORT(cuMemHostAlloc, fake_cuMemHostAlloc, (void** p, size_t b, unsigned f), (p, b, f))
EXPORT(cuMemFreeHost, fake_cuMemFreeHost, (void* p), (p))
EXPORT(cuModuleGetFunction, fake_cuModuleGetFunction, (void** f, void* m, const char* n), (f, m, n))
EXPORT(cuModuleLoadData, fake_cuModuleLoadData, (void** m, const void* i), (m, i))
EXPORT(cuStreamEndCapture, fake_cuStreamEndCapture, (void* s, void** g), (s, g))
#define SUCCEED(name) int name(void) { return 0; }
SUCCEED(cuEventRecord)
SUCCEED(cuGraphDestroy)
SUCCEED(cuGraphExecDestroy)
SUCCEED(cuGraphLaunch)
SUCCEED(cuLaunchKernel)
SUCCEED(cuMemcpyDtoHAsync_v2)
SUCCEED(cuModuleUnload)
SUCCEED(cuStreamBeginCapture_v2)
SUCCEED(cuStreamSynchronize)
SUCCEED(cuStreamWaitEvent)

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
