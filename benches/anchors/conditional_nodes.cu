// NVIDIA's graphConditionalNodes sample, its five functions written with CUDA runtime calls as
// the sample writes them, timed per call: the anchor of `tests/benches/conditional_nodes.rs`,
// which ports the same functions to `gpu_pipeline!`.
//
// Each function is the sample's whole call: a byte of device memory allocated, the graph
// built (nodes added by hand; the do-while's body and the captured while captured from a
// stream, as the sample does), instantiated, the byte set with `cudaMemset` before each launch
// and each launch synchronized, then everything destroyed and freed. The sample's kernels
// print; these count into `log[slot]` instead (the same kernels as
// tests/kernels/conditional_nodes.cu), so that the bench can check which bodies ran.
//
// Build and run on the GPU machine (CUDA 12.8+ driver and toolkit: IF with two bodies, SWITCH):
//   nvcc -O3 -arch=sm_90 -o conditional_nodes benches/anchors/conditional_nodes.cu
//   ./conditional_nodes 200
// Argument: timed calls per function (default 200), after 3 untimed. Prints one line per
// function, `function nodes calls us_per_call counted`: the top-level nodes of its graph, the
// timed calls, microseconds per call, and the sum of its log slots over every call (untimed
// ones included), which the bench checks.

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

// The counters, one slot per body (see the bench's SLOTS).
static unsigned int* log_d;
enum { LOG_SLOTS = 16 };

__global__ void cn_set_odd(const char* d, cudaGraphConditionalHandle handle)
{
    cudaGraphSetConditional(handle, *d & 0x01);
}

__global__ void cn_set_value(const char* d, cudaGraphConditionalHandle handle)
{
    cudaGraphSetConditional(handle, (unsigned char)*d);
}

__global__ void cn_count(unsigned int* log, unsigned int slot)
{
    log[slot] += 1u;
}

__global__ void cn_count_down(char* d, cudaGraphConditionalHandle handle)
{
    if (--(*d) == 0) cudaGraphSetConditional(handle, 0);
}

__global__ void cn_captured_while(char* d, cudaGraphConditionalHandle handle)
{
    if (*d) (*d)--;
    cudaGraphSetConditional(handle, (unsigned char)*d);
}

// A 1x1x1 kernel node's parameters for `func`, its arguments in `args`.
static cudaGraphNodeParams kernel_node(void* func, void** args)
{
    cudaGraphNodeParams params = {cudaGraphNodeTypeKernel};
    params.kernel.func = func;
    params.kernel.gridDim = dim3(1, 1, 1);
    params.kernel.blockDim = dim3(1, 1, 1);
    params.kernel.kernelParams = args;
    return params;
}

// Adds `cn_count(log_d, slot)` to `graph` after `deps`.
static void add_count(cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                      unsigned int slot)
{
    void* args[2] = {&log_d, &slot};
    cudaGraphNodeParams params = kernel_node((void*)cn_count, args);
    cudaGraphNode_t node;
    CHECK(cudaGraphAddNode(&node, graph, deps, ndeps, &params));
}

static size_t top_nodes(cudaGraph_t graph)
{
    size_t count = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    return count;
}

// Sets the byte, launches, synchronizes: the sample's step between launches.
static void launch_with(cudaGraphExec_t exec, char* d, int value)
{
    CHECK(cudaMemset(d, value, 1));
    CHECK(cudaGraphLaunch(exec, 0));
    CHECK(cudaDeviceSynchronize());
}

// A kernel node setting `handle` from `d` (`func`), then a conditional node of `type` with
// `size` bodies after it: the sample's `A -> B [ ... ]`. Returns the bodies.
static cudaGraph_t* kernel_then_conditional(cudaGraph_t graph, void* func, char** d,
                                            cudaGraphConditionalHandle* handle,
                                            cudaGraphConditionalNodeType type, unsigned size,
                                            cudaGraphNodeParams* c_params)
{
    void* args[2] = {d, handle};
    cudaGraphNodeParams params = kernel_node(func, args);
    cudaGraphNode_t kernel, conditional;
    CHECK(cudaGraphAddNode(&kernel, graph, nullptr, 0, &params));
    *c_params = {cudaGraphNodeTypeConditional};
    c_params->conditional.handle = *handle;
    c_params->conditional.type = type;
    c_params->conditional.size = size;
    CHECK(cudaGraphAddNode(&conditional, graph, &kernel, 1, c_params));
    return c_params->conditional.phGraph_out;
}

// simpleIfGraph: A -> IF [ count(0) ], launched with the byte 0, then 1.
static size_t simple_if()
{
    char* d;
    CHECK(cudaMalloc((void**)&d, 1));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph));
    cudaGraphNodeParams c_params;
    cudaGraph_t* bodies = kernel_then_conditional(graph, (void*)cn_set_odd, &d, &handle,
                                                  cudaGraphCondTypeIf, 1, &c_params);
    add_count(bodies[0], nullptr, 0, 0);
    CHECK(cudaGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
    launch_with(exec, d, 0);
    launch_with(exec, d, 1);
    size_t nodes = top_nodes(graph);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d));
    return nodes;
}

// simpleDoWhileGraph: WHILE (handle default 1) [ count(1) -> count(1) -> count_down ], the
// body captured from a stream, launched with the byte 10.
static size_t simple_do_while()
{
    char* d;
    CHECK(cudaMalloc((void**)&d, 1));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams c_params = {cudaGraphNodeTypeConditional};
    c_params.conditional.handle = handle;
    c_params.conditional.type = cudaGraphCondTypeWhile;
    c_params.conditional.size = 1;
    cudaGraphNode_t conditional;
    CHECK(cudaGraphAddNode(&conditional, graph, nullptr, 0, &c_params));
    cudaGraph_t body = c_params.conditional.phGraph_out[0];
    cudaStream_t capture;
    CHECK(cudaStreamCreate(&capture));
    CHECK(cudaStreamBeginCaptureToGraph(capture, body, nullptr, nullptr, 0,
                                        cudaStreamCaptureModeGlobal));
    cn_count<<<1, 1, 0, capture>>>(log_d, 1);
    cn_count<<<1, 1, 0, capture>>>(log_d, 1);
    cn_count_down<<<1, 1, 0, capture>>>(d, handle);
    CHECK(cudaStreamEndCapture(capture, nullptr));
    CHECK(cudaStreamDestroy(capture));
    CHECK(cudaGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
    launch_with(exec, d, 10);
    size_t nodes = top_nodes(graph);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d));
    return nodes;
}

// capturedWhileGraph: A -> WHILE [ C ] -> count(2), captured (the conditional node added to
// the capture by hand, its body captured from another stream), launched with the byte 0, then
// 10.
static size_t captured_while()
{
    char* d;
    CHECK(cudaMalloc((void**)&d, 1));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamCaptureStatus status;
    const cudaGraphNode_t* deps;
    size_t ndeps;
    cudaStream_t capture;
    CHECK(cudaStreamCreate(&capture));
    CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeGlobal));
    CHECK(cudaStreamGetCaptureInfo(capture, &status, nullptr, &graph, &deps, &ndeps));
    cudaGraphConditionalHandle handle;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph));
    cn_captured_while<<<1, 1, 0, capture>>>(d, handle);
    CHECK(cudaStreamGetCaptureInfo(capture, &status, nullptr, &graph, &deps, &ndeps));
    cudaGraphNodeParams c_params = {cudaGraphNodeTypeConditional};
    c_params.conditional.handle = handle;
    c_params.conditional.type = cudaGraphCondTypeWhile;
    c_params.conditional.size = 1;
    cudaGraphNode_t conditional;
    CHECK(cudaGraphAddNode(&conditional, graph, deps, ndeps, &c_params));
    cudaGraph_t body = c_params.conditional.phGraph_out[0];
    CHECK(cudaStreamUpdateCaptureDependencies(capture, &conditional, 1,
                                              cudaStreamSetCaptureDependencies));
    cn_count<<<1, 1, 0, capture>>>(log_d, 2);
    CHECK(cudaStreamEndCapture(capture, &graph));
    CHECK(cudaStreamDestroy(capture));
    cudaStream_t body_stream;
    CHECK(cudaStreamCreate(&body_stream));
    CHECK(cudaStreamBeginCaptureToGraph(body_stream, body, nullptr, nullptr, 0,
                                        cudaStreamCaptureModeGlobal));
    cn_captured_while<<<1, 1, 0, body_stream>>>(d, handle);
    CHECK(cudaStreamEndCapture(body_stream, nullptr));
    CHECK(cudaStreamDestroy(body_stream));
    CHECK(cudaGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
    launch_with(exec, d, 0);
    launch_with(exec, d, 10);
    size_t nodes = top_nodes(graph);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d));
    return nodes;
}

// simpleIfElseGraph: A -> IF [ count(3) | count(4) ], launched with the byte 0, then 1.
static size_t simple_if_else()
{
    char* d;
    CHECK(cudaMalloc((void**)&d, 1));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph));
    cudaGraphNodeParams c_params;
    cudaGraph_t* bodies = kernel_then_conditional(graph, (void*)cn_set_odd, &d, &handle,
                                                  cudaGraphCondTypeIf, 2, &c_params);
    add_count(bodies[0], nullptr, 0, 3);
    add_count(bodies[1], nullptr, 0, 4);
    CHECK(cudaGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
    launch_with(exec, d, 0);
    launch_with(exec, d, 1);
    size_t nodes = top_nodes(graph);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d));
    return nodes;
}

// simpleSwitchGraph: A -> SWITCH [ count(5) | count(6) | count(7) | count(8) ], launched with
// the byte 0, 1, 2, 3, 4 (4 runs no case).
static size_t simple_switch()
{
    char* d;
    CHECK(cudaMalloc((void**)&d, 1));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph));
    cudaGraphNodeParams c_params;
    cudaGraph_t* bodies = kernel_then_conditional(graph, (void*)cn_set_value, &d, &handle,
                                                  cudaGraphCondTypeSwitch, 4, &c_params);
    for (unsigned int i = 0; i < 4; i++) add_count(bodies[i], nullptr, 0, 5 + i);
    CHECK(cudaGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
    for (int i = 0; i < 5; i++) launch_with(exec, d, i);
    size_t nodes = top_nodes(graph);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d));
    return nodes;
}

struct Function {
    const char* name;
    size_t (*call)();
    unsigned int first_slot, slots;
};

int main(int argc, char** argv)
{
    int calls = argc > 1 ? std::atoi(argv[1]) : 200;
    if (calls <= 0) {
        std::fprintf(stderr, "usage: %s [CALLS > 0]\n", argv[0]);
        return 2;
    }
    const int warmups = 3;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc((void**)&log_d, LOG_SLOTS * sizeof(unsigned int)));
    const Function functions[] = {
        {"if", simple_if, 0, 1},
        {"do_while", simple_do_while, 1, 1},
        {"captured_while", captured_while, 2, 1},
        {"if_else", simple_if_else, 3, 2},
        {"switch", simple_switch, 5, 4},
    };
    for (const Function& f : functions) {
        CHECK(cudaMemset(log_d, 0, LOG_SLOTS * sizeof(unsigned int)));
        CHECK(cudaDeviceSynchronize());
        size_t nodes = 0;
        for (int i = 0; i < warmups; i++) nodes = f.call();
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; i++) f.call();
        double us = std::chrono::duration<double, std::micro>(
                        std::chrono::steady_clock::now() - start)
                        .count();
        unsigned int log_h[LOG_SLOTS];
        CHECK(cudaMemcpy(log_h, log_d, sizeof(log_h), cudaMemcpyDeviceToHost));
        unsigned long long counted = 0;
        for (unsigned int s = f.first_slot; s < f.first_slot + f.slots; s++) counted += log_h[s];
        std::printf("%s %zu %d %.3f %llu\n", f.name, nodes, calls, us / calls, counted);
    }
    CHECK(cudaFree(log_d));
    return 0;
}
