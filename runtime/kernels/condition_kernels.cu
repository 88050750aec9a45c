// Kernels that set a conditional node's condition themselves (gpu_pipeline_condition.cuh), for
// the runtime's examples and tests: runtime/src/graph/kernel_set.rs.
#include "gpu_pipeline_condition.cuh"

// n[0] -= 1, then the condition holds while n[0] > 0. One thread. The loop's words are
// loaded at the start, beside n[0], not after the store to it.
extern "C" __global__ void gp_count_down(unsigned int* n, gp_condition go)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    gp_condition_words words = gp_condition_begin(go);
    n[0] -= 1u;
    gp_set_condition_from(go, words, n[0] > 0u ? 1u : 0u);
}

// Sets the condition to value[0] (a switch's case, or non-zero for an `if`). One thread.
extern "C" __global__ void gp_set_to(const unsigned int* value, gp_condition go)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    gp_set_condition(go, value[0]);
}

// out[0] += 1: what a body does.
extern "C" __global__ void gp_bump(unsigned int* out)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    out[0] += 1u;
}

// dst[0] = src[0] - 1 and r[0] = dst[0]: one sweep of a ping-pong loop whose condition reads r.
extern "C" __global__ void gp_step(const unsigned int* src, unsigned int* dst, unsigned int* r)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    dst[0] = src[0] - 1u;
    r[0] = dst[0];
}
