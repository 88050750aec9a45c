// The raw C++ anchor of the conditional forms (issue 22): the graphs that
// `tests/tests/pipeline_conditionals.rs` and `runtime/benches/graph_build.rs` build with the
// macro, built here with CUDA runtime calls as NVIDIA's graphConditionalNodes sample builds
// them, replayed and timed per launch. Prints one line per form,
// `form launches us_per_launch`, for docs/PERFORMANCE.md; `tests/benches/conditionals.rs` runs
// it (CONDITIONALS_ANCHOR=./conditionals) in rounds alternating with the macro's forms.
//
// Build and run on the GPU machine (CUDA 12.8+ driver and toolkit: IF with two bodies, SWITCH):
//   nvcc -O3 -arch=sm_90 -o conditionals benches/anchors/conditionals.cu
//   ./conditionals 10000
// Argument: launches per form (default 10000). The forms:
//   if_else      set-handle kernel (flag != 0) -> IF(then: add 1, else: add 10)
//   switch       set-handle kernel (mode)      -> SWITCH(3 cases, each one add)
//   do_while     WHILE (handle default 1, assigned each launch) { sub 1; add 1; set-handle
//                kernel (residual > tol) }, 5 iterations a launch
//   kernel_while a kernel sets the handle (residual > tol) -> WHILE { sub 1 and set the handle
//                in the same kernel }, 5 iterations a launch (the form the language's
//                kernel-set conditions will give)
// Each launch restores its inputs with a memset node first, as the macro's bench steps do.

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
                         cudaGetErrorString(e_));                                         \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

__global__ void add_scalar(unsigned int n, float value, float* data)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += value;
}

__global__ void set_if_nonzero(cudaGraphConditionalHandle handle, const unsigned int* flag)
{
    cudaGraphSetConditional(handle, *flag != 0u ? 1u : 0u);
}

__global__ void set_value(cudaGraphConditionalHandle handle, const unsigned int* mode)
{
    cudaGraphSetConditional(handle, *mode);
}

__global__ void set_if_greater(cudaGraphConditionalHandle handle, const float* value, float tol)
{
    cudaGraphSetConditional(handle, *value > tol ? 1u : 0u);
}

__global__ void sub_and_set(cudaGraphConditionalHandle handle, float* value, float tol)
{
    *value -= 1.0f;
    cudaGraphSetConditional(handle, *value > tol ? 1u : 0u);
}

// CUDA 13's cudaGraphAddNode takes the edge data of each dependency (none here).
static cudaError_t add_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                            size_t ndeps, cudaGraphNodeParams* p)
{
#if CUDART_VERSION >= 13000
    return cudaGraphAddNode(node, graph, deps, nullptr, ndeps, p);
#else
    return cudaGraphAddNode(node, graph, deps, ndeps, p);
#endif
}

static cudaGraphNode_t kernel(cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                              void* func, void** args)
{
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeKernel;
    p.kernel.func = func;
    p.kernel.gridDim = dim3(1, 1, 1);
    p.kernel.blockDim = dim3(1, 1, 1);
    p.kernel.kernelParams = args;
    cudaGraphNode_t node;
    CHECK(add_node(&node, graph, deps, ndeps, &p));
    return node;
}

// A kernel node of add_scalar(1, value, data): arguments copied at node creation.
static cudaGraphNode_t add(cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                           float value, float* data)
{
    unsigned int n = 1;
    void* args[] = {&n, &value, &data};
    return kernel(graph, deps, ndeps, (void*)add_scalar, args);
}

static cudaGraphNode_t conditional(cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                                   cudaGraphConditionalHandle handle,
                                   cudaGraphConditionalNodeType type, unsigned int size,
                                   cudaGraph_t** bodies)
{
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = handle;
    p.conditional.type = type;
    p.conditional.size = size;
    cudaGraphNode_t node;
    CHECK(add_node(&node, graph, deps, ndeps, &p));
    *bodies = p.conditional.phGraph_out;
    return node;
}

static double time_launches(cudaGraph_t graph, cudaStream_t stream, int launches)
{
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphUpload(exec, stream));
    for (int i = 0; i < 10; ++i) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    auto end = std::chrono::steady_clock::now();
    CHECK(cudaGraphExecDestroy(exec));
    return std::chrono::duration<double, std::micro>(end - start).count() / launches;
}

int main(int argc, char** argv)
{
    int launches = argc > 1 ? std::atoi(argv[1]) : 10000;
    int driver = 0;
    CHECK(cudaDriverGetVersion(&driver));
    if (driver < 12080) {
        std::fprintf(stderr, "needs a CUDA 12.8+ driver (IF with two bodies, SWITCH); this is %d\n",
                     driver);
        return 1;
    }
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    unsigned int *flag, *mode;
    float *then, *other, *out, *residual, *iterations;
    CHECK(cudaMalloc(&flag, 4));
    CHECK(cudaMalloc(&mode, 4));
    CHECK(cudaMalloc(&then, 4));
    CHECK(cudaMalloc(&other, 4));
    CHECK(cudaMalloc(&out, 4));
    CHECK(cudaMalloc(&residual, 4));
    CHECK(cudaMalloc(&iterations, 4));
    CHECK(cudaMemset(flag, 0, 4));
    const unsigned int two = 2;
    CHECK(cudaMemcpy(mode, &two, 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(then, 0, 4));
    CHECK(cudaMemset(other, 0, 4));
    CHECK(cudaMemset(out, 0, 4));
    CHECK(cudaMemset(iterations, 0, 4));
    float tol = 0.5f;
    const float five = 5.0f;

    std::printf("form launches us_per_launch\n");

    {  // if/else: flag is 0, the else body runs.
        cudaGraph_t graph;
        CHECK(cudaGraphCreate(&graph, 0));
        cudaGraphConditionalHandle handle;
        CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
        void* args[] = {&handle, &flag};
        cudaGraphNode_t set = kernel(graph, nullptr, 0, (void*)set_if_nonzero, args);
        cudaGraph_t* bodies;
        conditional(graph, &set, 1, handle, cudaGraphCondTypeIf, 2, &bodies);
        add(bodies[0], nullptr, 0, 1.0f, then);
        add(bodies[1], nullptr, 0, 10.0f, other);
        std::printf("if_else %d %.3f\n", launches, time_launches(graph, stream, launches));
        CHECK(cudaGraphDestroy(graph));
    }
    {  // switch on mode (2): case 2 runs.
        cudaGraph_t graph;
        CHECK(cudaGraphCreate(&graph, 0));
        cudaGraphConditionalHandle handle;
        CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
        void* args[] = {&handle, &mode};
        cudaGraphNode_t set = kernel(graph, nullptr, 0, (void*)set_value, args);
        cudaGraph_t* bodies;
        conditional(graph, &set, 1, handle, cudaGraphCondTypeSwitch, 3, &bodies);
        add(bodies[0], nullptr, 0, 1.0f, out);
        add(bodies[1], nullptr, 0, 10.0f, out);
        add(bodies[2], nullptr, 0, 100.0f, out);
        std::printf("switch %d %.3f\n", launches, time_launches(graph, stream, launches));
        CHECK(cudaGraphDestroy(graph));
    }
    {  // do-while from residual 5: 5 iterations.
        cudaGraph_t graph;
        CHECK(cudaGraphCreate(&graph, 0));
        cudaMemsetParams reset = {};
        reset.dst = residual;
        reset.value = *reinterpret_cast<const unsigned int*>(&five);
        reset.elementSize = 4;
        reset.width = 1;
        reset.height = 1;
        cudaGraphNode_t init;
        CHECK(cudaGraphAddMemsetNode(&init, graph, nullptr, 0, &reset));
        cudaGraphConditionalHandle handle;
        CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
        cudaGraph_t* bodies;
        conditional(graph, &init, 1, handle, cudaGraphCondTypeWhile, 1, &bodies);
        cudaGraphNode_t a = add(bodies[0], nullptr, 0, -1.0f, residual);
        cudaGraphNode_t b = add(bodies[0], &a, 1, 1.0f, iterations);
        void* args[] = {&handle, &residual, &tol};
        kernel(bodies[0], &b, 1, (void*)set_if_greater, args);
        std::printf("do_while %d %.3f\n", launches, time_launches(graph, stream, launches));
        CHECK(cudaGraphDestroy(graph));
    }
    {  // A kernel-set while from residual 5: 5 iterations.
        cudaGraph_t graph;
        CHECK(cudaGraphCreate(&graph, 0));
        cudaMemsetParams reset = {};
        reset.dst = residual;
        reset.value = *reinterpret_cast<const unsigned int*>(&five);
        reset.elementSize = 4;
        reset.width = 1;
        reset.height = 1;
        cudaGraphNode_t init;
        CHECK(cudaGraphAddMemsetNode(&init, graph, nullptr, 0, &reset));
        cudaGraphConditionalHandle handle;
        CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
        void* first[] = {&handle, &residual, &tol};
        cudaGraphNode_t set = kernel(graph, &init, 1, (void*)set_if_greater, first);
        cudaGraph_t* bodies;
        conditional(graph, &set, 1, handle, cudaGraphCondTypeWhile, 1, &bodies);
        void* args[] = {&handle, &residual, &tol};
        kernel(bodies[0], nullptr, 0, (void*)sub_and_set, args);
        std::printf("kernel_while %d %.3f\n", launches, time_launches(graph, stream, launches));
        CHECK(cudaGraphDestroy(graph));
    }
    float it = 0.0f;
    CHECK(cudaMemcpy(&it, iterations, 4, cudaMemcpyDeviceToHost));
    // 5 per do-while launch (warm-up included).
    if (it != 5.0f * (launches + 10)) {
        std::fprintf(stderr, "do_while ran %.0f iterations, expected %d\n", it, 5 * (launches + 10));
        return 1;
    }
    return 0;
}
