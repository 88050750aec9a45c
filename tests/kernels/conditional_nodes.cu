// Kernels of tests/benches/conditional_nodes.rs: NVIDIA's graphConditionalNodes sample's
// kernels, written for gpu_pipeline! (a `gp_condition` parameter, set with
// `gp_set_condition`), with each `printf` replaced by a count in `log[slot]` so that the bench
// can check which bodies ran. benches/anchors/conditional_nodes.cu has the same kernels for
// CUDA's own handle. One thread each, as in the sample (launched with grid 1 block 1).
//
// tools/build-ptx compiles this file to conditional_nodes.ptx beside it (NVRTC, compute_75).
#include "../../runtime/kernels/gpu_pipeline_condition.cuh"

// ifGraphKernelA: the condition holds when d[0] is odd.
extern "C" __global__ void cn_set_odd(const unsigned char* d, gp_condition go)
{
    gp_set_condition(go, d[0] & 0x01u);
}

// switchGraphKernelA: the switch runs case d[0].
extern "C" __global__ void cn_set_value(const unsigned char* d, gp_condition go)
{
    gp_set_condition(go, d[0]);
}

// The sample's bodies (ifGraphKernelC, doWhileEmptyKernel, ...): one count instead of a print.
extern "C" __global__ void cn_count(unsigned int* log, unsigned int slot)
{
    log[slot] += 1u;
}

// doWhileLoopKernel: d[0] -= 1; the loop goes on until it reaches 0.
extern "C" __global__ void cn_count_down(unsigned char* d, gp_condition go)
{
    gp_condition_words words = gp_condition_begin(go);
    unsigned char value = (unsigned char)(d[0] - 1u);
    d[0] = value;
    gp_set_condition_from(go, words, value != 0u);
}

// capturedWhileKernel: d[0] -= 1 unless it is 0; the loop goes on while it is not 0.
extern "C" __global__ void cn_captured_while(unsigned char* d, gp_condition go)
{
    gp_condition_words words = gp_condition_begin(go);
    unsigned char value = d[0];
    if (value != 0u) {
        value -= 1u;
        d[0] = value;
    }
    gp_set_condition_from(go, words, value);
}
