// The raw C++ anchor of NVIDIA's simpleCudaGraphs sample: its two methods, written again here
// with the CUDA runtime calls the sample makes, in the order it makes them, over the kernels
// of `tests/kernels/simple_graphs.cu` (included below, so both sides run the same code).
// `tests/benches/simple_graphs.rs` runs the same two methods written with `gpu_pipeline!`
// alone and runs this program (SIMPLE_GRAPHS_ANCHOR=./simple_graphs) in rounds alternating
// with its own.
//
// Build and run on the GPU machine, from the repository root:
//   nvcc -O3 -arch=sm_90 -o simple_graphs benches/anchors/simple_graphs.cu
//   ./simple_graphs [SIZE [LAUNCHES]]   (SIZE floats to sum, default 1 << 24 as the sample's;
//                                        LAUNCHES of each graph, default 3 as the sample's
//                                        GRAPH_LAUNCH_ITERATIONS)
// Prints one line per method, `method nodes callbacks total_ms replay_ms sum`:
//   manual          the graph built node by node (memcpy and memset roots, reduce, a second
//                   memset, reduce_final, the copy of the result to the host, the host node)
//   stream_capture  the same work captured from three streams forked and joined with events
// Each method is timed as a whole, from its first call to its return (streams and events
// created, the graph built or captured, instantiated, cloned and the clone instantiated,
// LAUNCHES launches of the graph and a synchronize, LAUNCHES of the clone and a synchronize,
// everything destroyed), after one untimed call that loads the kernels and warms the driver;
// `replay_ms` is the part spent in the launches and their two synchronizes. `nodes` is what
// cudaGraphGetNodes counts, `callbacks` how many times the host node ran and `sum` the sum
// each of them saw (the program fails if two differ: the reduction has a fixed order).
//
// What differs from the sample: the input is a hash of the index shaped as the sample's
// `(rand() & 0xFF) / RAND_MAX` (the bench computes the same values), and the host node
// records the sum it sees instead of printing it (the bench parses this program's output, and
// the port records too); the sample's other prints are left out. As in the sample, the
// capture method's third stream and three events are not destroyed.

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../tests/kernels/simple_graphs.cu"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
                         cudaGetErrorString(e_));                                         \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

static const unsigned int THREADS_PER_BLOCK = SIMPLE_GRAPHS_THREADS;
static const size_t MAX_BLOCKS = 512;
static int launches = 3;

// The sample's `(rand() & 0xFF) / (float)RAND_MAX`, with a hash of the index for rand().
static float input_value(size_t i)
{
    unsigned int h = (unsigned int)i * 2654435761u;
    h ^= h >> 15;
    return (float)((h >> 8) & 0xFFu) / 2147483647.0f;
}

// What the sample's host node gets: the method's name and the host copy of the result.
struct CallbackData {
    const char* fn_name;
    double* data;
    std::vector<double>* seen;
};

// The sample's myHostNodeCallback, recording the sum instead of printing it.
static void CUDART_CB host_node_callback(void* data)
{
    CallbackData* callback = (CallbackData*)data;
    callback->seen->push_back(*callback->data);
    *callback->data = 0.0;  // reset the result, as the sample does
}

struct Timed {
    size_t nodes;
    double total_ms;
    double replay_ms;
};

typedef std::chrono::steady_clock Clock;

static double ms_since(Clock::time_point start)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// LAUNCHES launches of `exec`, then LAUNCHES of `cloned`, each set followed by a synchronize,
// as the sample's loops; returns the milliseconds they took.
static double replay(cudaGraphExec_t exec, cudaGraphExec_t cloned, cudaStream_t stream)
{
    Clock::time_point start = Clock::now();
    for (int i = 0; i < launches; i++) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    for (int i = 0; i < launches; i++) CHECK(cudaGraphLaunch(cloned, stream));
    CHECK(cudaStreamSynchronize(stream));
    return ms_since(start);
}

// The sample's cudaGraphsManual.
static Timed graphs_manual(float* input_h, float* input_d, double* partials_d, double* result_d,
                           size_t input_size, size_t blocks, std::vector<double>* seen)
{
    Clock::time_point start = Clock::now();
    cudaStream_t stream_for_graph;
    cudaGraph_t graph;
    std::vector<cudaGraphNode_t> dependencies;
    cudaGraphNode_t memcpy_node, kernel_node, memset_node;
    double result_h = 0.0;
    CHECK(cudaStreamCreate(&stream_for_graph));

    cudaKernelNodeParams kernel_params = {};
    cudaMemcpy3DParms memcpy_params = {};
    cudaMemsetParams memset_params = {};
    memcpy_params.srcPos = make_cudaPos(0, 0, 0);
    memcpy_params.srcPtr =
        make_cudaPitchedPtr(input_h, sizeof(float) * input_size, input_size, 1);
    memcpy_params.dstPos = make_cudaPos(0, 0, 0);
    memcpy_params.dstPtr =
        make_cudaPitchedPtr(input_d, sizeof(float) * input_size, input_size, 1);
    memcpy_params.extent = make_cudaExtent(sizeof(float) * input_size, 1, 1);
    memcpy_params.kind = cudaMemcpyHostToDevice;
    memset_params.dst = (void*)partials_d;
    memset_params.value = 0;
    memset_params.pitch = 0;
    memset_params.elementSize = sizeof(float);  // at most 4 bytes: a double is two
    memset_params.width = blocks * 2;
    memset_params.height = 1;

    CHECK(cudaGraphCreate(&graph, 0));
    CHECK(cudaGraphAddMemcpyNode(&memcpy_node, graph, nullptr, 0, &memcpy_params));
    CHECK(cudaGraphAddMemsetNode(&memset_node, graph, nullptr, 0, &memset_params));
    dependencies.push_back(memset_node);
    dependencies.push_back(memcpy_node);

    void* reduce_args[4] = {(void*)&input_d, (void*)&partials_d, &input_size, &blocks};
    kernel_params.func = (void*)reduce;
    kernel_params.gridDim = dim3((unsigned int)blocks, 1, 1);
    kernel_params.blockDim = dim3(THREADS_PER_BLOCK, 1, 1);
    kernel_params.sharedMemBytes = 0;
    kernel_params.kernelParams = reduce_args;
    kernel_params.extra = nullptr;
    CHECK(cudaGraphAddKernelNode(&kernel_node, graph, dependencies.data(), dependencies.size(),
                                 &kernel_params));
    dependencies.clear();
    dependencies.push_back(kernel_node);

    std::memset(&memset_params, 0, sizeof(memset_params));
    memset_params.dst = result_d;
    memset_params.value = 0;
    memset_params.elementSize = sizeof(float);
    memset_params.width = 2;
    memset_params.height = 1;
    CHECK(cudaGraphAddMemsetNode(&memset_node, graph, nullptr, 0, &memset_params));
    dependencies.push_back(memset_node);

    std::memset(&kernel_params, 0, sizeof(kernel_params));
    kernel_params.func = (void*)reduce_final;
    kernel_params.gridDim = dim3(1, 1, 1);
    kernel_params.blockDim = dim3(THREADS_PER_BLOCK, 1, 1);
    kernel_params.sharedMemBytes = 0;
    void* final_args[3] = {(void*)&partials_d, (void*)&result_d, &blocks};
    kernel_params.kernelParams = final_args;
    kernel_params.extra = nullptr;
    CHECK(cudaGraphAddKernelNode(&kernel_node, graph, dependencies.data(), dependencies.size(),
                                 &kernel_params));
    dependencies.clear();
    dependencies.push_back(kernel_node);

    std::memset(&memcpy_params, 0, sizeof(memcpy_params));
    memcpy_params.srcPos = make_cudaPos(0, 0, 0);
    memcpy_params.srcPtr = make_cudaPitchedPtr(result_d, sizeof(double), 1, 1);
    memcpy_params.dstPos = make_cudaPos(0, 0, 0);
    memcpy_params.dstPtr = make_cudaPitchedPtr(&result_h, sizeof(double), 1, 1);
    memcpy_params.extent = make_cudaExtent(sizeof(double), 1, 1);
    memcpy_params.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaGraphAddMemcpyNode(&memcpy_node, graph, dependencies.data(), dependencies.size(),
                                 &memcpy_params));
    dependencies.clear();
    dependencies.push_back(memcpy_node);

    cudaGraphNode_t host_node;
    cudaHostNodeParams host_params = {};
    host_params.fn = host_node_callback;
    CallbackData callback = {"cudaGraphsManual", &result_h, seen};
    host_params.userData = &callback;
    CHECK(cudaGraphAddHostNode(&host_node, graph, dependencies.data(), dependencies.size(),
                               &host_params));

    size_t nodes = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));

    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaGraph_t cloned;
    cudaGraphExec_t cloned_exec;
    CHECK(cudaGraphClone(&cloned, graph));
    CHECK(cudaGraphInstantiate(&cloned_exec, cloned, 0));

    double replay_ms = replay(exec, cloned_exec, stream_for_graph);

    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphExecDestroy(cloned_exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaGraphDestroy(cloned));
    CHECK(cudaStreamDestroy(stream_for_graph));
    return Timed{nodes, ms_since(start), replay_ms};
}

// The sample's cudaGraphsUsingStreamCapture.
static Timed graphs_using_stream_capture(float* input_h, float* input_d, double* partials_d,
                                         double* result_d, size_t input_size, size_t blocks,
                                         std::vector<double>* seen)
{
    Clock::time_point start = Clock::now();
    cudaStream_t stream1, stream2, stream3, stream_for_graph;
    cudaEvent_t fork_event, memset_event1, memset_event2;
    cudaGraph_t graph;
    double result_h = 0.0;
    CHECK(cudaStreamCreate(&stream1));
    CHECK(cudaStreamCreate(&stream2));
    CHECK(cudaStreamCreate(&stream3));
    CHECK(cudaStreamCreate(&stream_for_graph));
    CHECK(cudaEventCreate(&fork_event));
    CHECK(cudaEventCreate(&memset_event1));
    CHECK(cudaEventCreate(&memset_event2));

    CHECK(cudaStreamBeginCapture(stream1, cudaStreamCaptureModeGlobal));
    CHECK(cudaEventRecord(fork_event, stream1));
    CHECK(cudaStreamWaitEvent(stream2, fork_event, 0));
    CHECK(cudaStreamWaitEvent(stream3, fork_event, 0));
    CHECK(cudaMemcpyAsync(input_d, input_h, sizeof(float) * input_size, cudaMemcpyDefault,
                          stream1));
    CHECK(cudaMemsetAsync(partials_d, 0, sizeof(double) * blocks, stream2));
    CHECK(cudaEventRecord(memset_event1, stream2));
    CHECK(cudaMemsetAsync(result_d, 0, sizeof(double), stream3));
    CHECK(cudaEventRecord(memset_event2, stream3));
    CHECK(cudaStreamWaitEvent(stream1, memset_event1, 0));
    reduce<<<(unsigned int)blocks, THREADS_PER_BLOCK, 0, stream1>>>(input_d, partials_d,
                                                                    input_size, blocks);
    CHECK(cudaStreamWaitEvent(stream1, memset_event2, 0));
    reduce_final<<<1, THREADS_PER_BLOCK, 0, stream1>>>(partials_d, result_d, blocks);
    CHECK(cudaMemcpyAsync(&result_h, result_d, sizeof(double), cudaMemcpyDefault, stream1));
    CallbackData callback = {"cudaGraphsUsingStreamCapture", &result_h, seen};
    CHECK(cudaLaunchHostFunc(stream1, host_node_callback, &callback));
    CHECK(cudaStreamEndCapture(stream1, &graph));

    size_t nodes = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));

    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaGraph_t cloned;
    cudaGraphExec_t cloned_exec;
    CHECK(cudaGraphClone(&cloned, graph));
    CHECK(cudaGraphInstantiate(&cloned_exec, cloned, 0));

    double replay_ms = replay(exec, cloned_exec, stream_for_graph);

    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphExecDestroy(cloned_exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaGraphDestroy(cloned));
    CHECK(cudaStreamDestroy(stream1));
    CHECK(cudaStreamDestroy(stream2));
    CHECK(cudaStreamDestroy(stream_for_graph));
    return Timed{nodes, ms_since(start), replay_ms};
}

typedef Timed (*Method)(float*, float*, double*, double*, size_t, size_t, std::vector<double>*);

int main(int argc, char** argv)
{
    unsigned long long size = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1ull << 24;
    launches = argc > 2 ? std::atoi(argv[2]) : 3;
    if (size < 1 || size > (1ull << 28) || launches < 1 || argc > 3) {
        std::fprintf(stderr, "usage: %s [SIZE [LAUNCHES]], 1 <= SIZE <= 2^28, LAUNCHES >= 1\n",
                     argv[0]);
        return 2;
    }
    float *input_d = nullptr, *input_h = nullptr;
    double *partials_d = nullptr, *result_d = nullptr;
    CHECK(cudaMallocHost(&input_h, sizeof(float) * size));
    CHECK(cudaMalloc(&input_d, sizeof(float) * size));
    CHECK(cudaMalloc(&partials_d, sizeof(double) * MAX_BLOCKS));
    CHECK(cudaMalloc(&result_d, sizeof(double)));
    for (size_t i = 0; i < size; i++) input_h[i] = input_value(i);

    const char* names[2] = {"manual", "stream_capture"};
    Method methods[2] = {graphs_manual, graphs_using_stream_capture};
    for (int m = 0; m < 2; m++) {
        Timed timed = {};
        std::vector<double> seen;
        for (int pass = 0; pass < 2; pass++) {  // one untimed call, then the timed one
            seen.clear();
            timed = methods[m](input_h, input_d, partials_d, result_d, size, MAX_BLOCKS, &seen);
        }
        if (seen.empty()) {
            std::fprintf(stderr, "%s: the host node never ran\n", names[m]);
            return 1;
        }
        for (double sum : seen) {
            if (sum != seen[0]) {
                std::fprintf(stderr, "%s: the host node saw %.17g, then %.17g\n", names[m],
                             seen[0], sum);
                return 1;
            }
        }
        std::printf("%s %zu %zu %.6f %.6f %.17g\n", names[m], timed.nodes, seen.size(),
                    timed.total_ms, timed.replay_ms, seen[0]);
    }
    CHECK(cudaFree(input_d));
    CHECK(cudaFree(partials_d));
    CHECK(cudaFree(result_d));
    CHECK(cudaFreeHost(input_h));
    return 0;
}
