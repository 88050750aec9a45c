// Kernels of tests/benches/conditionals.rs that set a condition themselves: the kernel-set
// `while` of benches/anchors/conditionals.cu (`set_if_greater`, `sub_and_set`), written for
// gpu_pipeline! (a `gp_condition` parameter, set with `gp_set_condition`). One thread each,
// as in the anchor (launched with grid 1 block 1).
//
// tools/build-ptx compiles this file to conditionals.ptx beside it (NVRTC, compute_75).
#include "../../runtime/kernels/gpu_pipeline_condition.cuh"

// The condition holds while value[0] > tol: the test before the loop's first iteration.
extern "C" __global__ void cb_set_if_greater(const float* value, float tol, gp_condition go)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    gp_set_condition(go, value[0] > tol ? 1u : 0u);
}

// value[0] -= 1, then the condition holds while value[0] > tol: the loop's body and its test
// in one kernel.
// The loop's words are loaded at the start, beside `value`, not after the store to it.
extern "C" __global__ void cb_sub_and_set(float* value, float tol, gp_condition go)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    gp_condition_words words = gp_condition_begin(go);
    value[0] -= 1.0f;
    gp_set_condition_from(go, words, value[0] > tol ? 1u : 0u);
}
