// The raw C++ anchor of NVIDIA's jacobiCudaGraphs sample (issue 22): its three GPU methods,
// written again here with the CUDA runtime calls the sample makes, in the order it makes them,
// over the kernels of `tests/kernels/jacobi_graphs.cu` (included below, so both sides run the
// same code). `tests/benches/jacobi_graphs.rs` runs the same three methods written with
// `gpu_pipeline!` alone and runs this program (JACOBI_GRAPHS_ANCHOR=./jacobi_graphs) in rounds
// alternating with its own.
//
// Build and run on the GPU machine, from the repository root:
//   nvcc -O3 -arch=sm_90 -o jacobi_graphs benches/anchors/jacobi_graphs.cu
//   ./jacobi_graphs [N]        (N: the order of the system, default 512 as the sample's N_ROWS)
// Prints one line per method, `method iterations ms error`:
//   set_params   one graph (memset, kernel, copy to the host) instantiated once; before each
//                launch cudaGraphExecKernelNodeSetParams exchanges x and x_new
//   exec_update  the sweep captured from the stream again every iteration, x and x_new
//                exchanged, and the executable graph updated with cudaGraphExecUpdate
//   stream       no graph: memset, kernel and copy enqueued on the stream every iteration
// Each method is timed as the sample times it, the whole function from its first call to its
// return (the device sum allocated, the sweeps until sum(|dx|) <= 1e-2, each followed by a
// stream synchronize and the host's test, then the final error computed on the device), after
// one untimed solve by the same method that loads the kernels and warms the driver. The
// system is the sample's: A has n + 1 on its diagonal and 1 elsewhere, b is 2n, x starts at 0.

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../tests/kernels/jacobi_graphs.cu"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
                         cudaGetErrorString(e_));                                         \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

static const float CONV_THRESHOLD = 1.0e-2f;
static const unsigned int THREADS = 256;

struct System {
    unsigned int n;
    float* A;
    double* b;
    double* x;
    double* x_new;
    cudaStream_t stream;
    int max_iter;
};

static dim3 sweep_blocks(unsigned int n) { return dim3(n / JACOBI_ROWS_PER_CTA + 2, 1, 1); }
static size_t sweep_shared(unsigned int n) { return n * sizeof(double); }

// The sample's end of every method: the final error of the latest x, computed on the device.
static double final_error_of(const System& s, double* d_sum, const double* latest)
{
    double sum = 0.0;
    CHECK(cudaMemsetAsync(d_sum, 0, sizeof(double), s.stream));
    dim3 nblocks(s.n / THREADS + 1, 1, 1);
    size_t shared = (THREADS / 32 + 1) * sizeof(double);
    final_error<<<nblocks, THREADS, shared, s.stream>>>(s.n, latest, d_sum);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(&sum, d_sum, sizeof(double), cudaMemcpyDeviceToHost, s.stream));
    CHECK(cudaStreamSynchronize(s.stream));
    return sum;
}

// The sample's JacobiMethodGpuCudaGraphExecKernelSetParams.
static double set_params(const System& s, int* iterations)
{
    double sum = 0.0;
    double* d_sum = nullptr;
    CHECK(cudaMalloc(&d_sum, sizeof(double)));

    cudaGraph_t graph;
    cudaGraphExec_t exec = nullptr;
    cudaGraphNode_t memset_node, kernel_node, memcpy_node;
    CHECK(cudaGraphCreate(&graph, 0));

    cudaMemsetParams memset_params = {};
    memset_params.dst = d_sum;
    memset_params.value = 0;
    memset_params.pitch = 0;
    memset_params.elementSize = sizeof(float);
    memset_params.width = 2;
    memset_params.height = 1;
    CHECK(cudaGraphAddMemsetNode(&memset_node, graph, nullptr, 0, &memset_params));

    unsigned int n = s.n;
    float conv = CONV_THRESHOLD;
    void* args0[7] = {&n, (void*)&s.A, (void*)&s.b, &conv, (void*)&s.x, (void*)&s.x_new, &d_sum};
    void* args1[7] = {&n, (void*)&s.A, (void*)&s.b, &conv, (void*)&s.x_new, (void*)&s.x, &d_sum};
    cudaKernelNodeParams params0 = {};
    params0.func = (void*)jacobi_method;
    params0.gridDim = sweep_blocks(n);
    params0.blockDim = dim3(THREADS, 1, 1);
    params0.sharedMemBytes = (unsigned int)sweep_shared(n);
    params0.kernelParams = args0;
    cudaKernelNodeParams params1 = params0;
    params1.kernelParams = args1;
    CHECK(cudaGraphAddKernelNode(&kernel_node, graph, &memset_node, 1, &params0));

    cudaMemcpy3DParms memcpy_params = {};
    memcpy_params.srcPos = make_cudaPos(0, 0, 0);
    memcpy_params.srcPtr = make_cudaPitchedPtr(d_sum, sizeof(double), 1, 1);
    memcpy_params.dstPos = make_cudaPos(0, 0, 0);
    memcpy_params.dstPtr = make_cudaPitchedPtr(&sum, sizeof(double), 1, 1);
    memcpy_params.extent = make_cudaExtent(sizeof(double), 1, 1);
    memcpy_params.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaGraphAddMemcpyNode(&memcpy_node, graph, &kernel_node, 1, &memcpy_params));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));

    double error = -1.0;
    int k = 0;
    for (k = 0; k < s.max_iter; k++) {
        CHECK(cudaGraphExecKernelNodeSetParams(exec, kernel_node,
                                               (k & 1) == 0 ? &params0 : &params1));
        CHECK(cudaGraphLaunch(exec, s.stream));
        CHECK(cudaStreamSynchronize(s.stream));
        if (sum <= CONV_THRESHOLD) {
            error = final_error_of(s, d_sum, (k & 1) == 0 ? s.x_new : s.x);
            break;
        }
    }
    *iterations = k + 1;
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d_sum));
    return error;
}

// The sample's JacobiMethodGpuCudaGraphExecUpdate.
static double exec_update(const System& s, int* iterations)
{
    double sum = 0.0;
    double* d_sum = nullptr;
    CHECK(cudaMalloc(&d_sum, sizeof(double)));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;

    double error = -1.0;
    int k = 0;
    for (k = 0; k < s.max_iter; k++) {
        CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeGlobal));
        CHECK(cudaMemsetAsync(d_sum, 0, sizeof(double), s.stream));
        const double* from = (k & 1) == 0 ? s.x : s.x_new;
        double* to = (k & 1) == 0 ? s.x_new : s.x;
        jacobi_method<<<sweep_blocks(s.n), THREADS, sweep_shared(s.n), s.stream>>>(
            s.n, s.A, s.b, CONV_THRESHOLD, from, to, d_sum);
        CHECK(cudaMemcpyAsync(&sum, d_sum, sizeof(double), cudaMemcpyDeviceToHost, s.stream));
        CHECK(cudaStreamEndCapture(s.stream, &graph));

        if (exec == nullptr) {
            CHECK(cudaGraphInstantiate(&exec, graph, 0));
        } else {
            cudaGraphExecUpdateResultInfo info;
            if (cudaGraphExecUpdate(exec, graph, &info) != cudaSuccess) {
                (void)cudaGetLastError();
                CHECK(cudaGraphExecDestroy(exec));
                std::fprintf(stderr, "k = %d: graph update failed (%d)\n", k, (int)info.result);
                CHECK(cudaGraphInstantiate(&exec, graph, 0));
            }
        }
        CHECK(cudaGraphLaunch(exec, s.stream));
        CHECK(cudaStreamSynchronize(s.stream));
        // As in the sample, the captured graph is not destroyed (it leaks, one per iteration):
        // the anchor saves the cudaGraphDestroy that a program without the leak would pay.
        if (sum <= CONV_THRESHOLD) {
            error = final_error_of(s, d_sum, to);
            break;
        }
    }
    *iterations = k + 1;
    if (exec != nullptr) CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaFree(d_sum));
    return error;
}

// The sample's JacobiMethodGpu: no graph.
static double stream_method(const System& s, int* iterations)
{
    double sum = 0.0;
    double* d_sum = nullptr;
    CHECK(cudaMalloc(&d_sum, sizeof(double)));
    double error = -1.0;
    int k = 0;
    for (k = 0; k < s.max_iter; k++) {
        CHECK(cudaMemsetAsync(d_sum, 0, sizeof(double), s.stream));
        const double* from = (k & 1) == 0 ? s.x : s.x_new;
        double* to = (k & 1) == 0 ? s.x_new : s.x;
        jacobi_method<<<sweep_blocks(s.n), THREADS, sweep_shared(s.n), s.stream>>>(
            s.n, s.A, s.b, CONV_THRESHOLD, from, to, d_sum);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyAsync(&sum, d_sum, sizeof(double), cudaMemcpyDeviceToHost, s.stream));
        CHECK(cudaStreamSynchronize(s.stream));
        if (sum <= CONV_THRESHOLD) {
            error = final_error_of(s, d_sum, to);
            break;
        }
    }
    *iterations = k + 1;
    CHECK(cudaFree(d_sum));
    return error;
}

typedef double (*Method)(const System&, int*);

int main(int argc, char** argv)
{
    unsigned int n = argc > 1 ? (unsigned int)std::strtoul(argv[1], nullptr, 10) : 512;
    if (n < 8 || n > 4096) {
        std::fprintf(stderr, "usage: %s [N], 8 <= N <= 4096\n", argv[0]);
        return 2;
    }
    std::vector<float> A((size_t)n * n, 1.0f);
    std::vector<double> b(n, 2.0 * n);
    for (unsigned int i = 0; i < n; i++) A[(size_t)i * n + i] = n + 1.0f;

    System s = {};
    s.n = n;
    s.max_iter = 4 * (int)n * (int)n;
    CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&s.A, sizeof(float) * n * n));
    CHECK(cudaMalloc(&s.b, sizeof(double) * n));
    CHECK(cudaMalloc(&s.x, sizeof(double) * n));
    CHECK(cudaMalloc(&s.x_new, sizeof(double) * n));
    CHECK(cudaMemcpy(s.A, A.data(), sizeof(float) * n * n, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(s.b, b.data(), sizeof(double) * n, cudaMemcpyHostToDevice));

    const char* names[3] = {"set_params", "exec_update", "stream"};
    Method methods[3] = {set_params, exec_update, stream_method};
    for (int m = 0; m < 3; m++) {
        int iterations = 0;
        double error = 0.0;
        double ms = 0.0;
        for (int timed = 0; timed < 2; timed++) {  // one untimed solve, then the timed one
            CHECK(cudaMemsetAsync(s.x, 0, sizeof(double) * n, s.stream));
            CHECK(cudaMemsetAsync(s.x_new, 0, sizeof(double) * n, s.stream));
            CHECK(cudaStreamSynchronize(s.stream));
            auto start = std::chrono::steady_clock::now();
            error = methods[m](s, &iterations);
            auto stop = std::chrono::steady_clock::now();
            ms = std::chrono::duration<double, std::milli>(stop - start).count();
        }
        std::printf("%s %d %.6f %.6e\n", names[m], iterations, ms, error);
    }
    CHECK(cudaFree(s.A));
    CHECK(cudaFree(s.b));
    CHECK(cudaFree(s.x));
    CHECK(cudaFree(s.x_new));
    CHECK(cudaStreamDestroy(s.stream));
    return 0;
}
