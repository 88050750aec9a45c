// What a kernel includes to set a device `while`, `do ... while`, `if` or `switch` condition
// of a gpu_pipeline step itself (a kernel parameter declared `Condition` in `gpu_pipeline!`,
// `SetsCondition` in a signature), so that no condition kernel of the library runs:
//
//     #include "gpu_pipeline_condition.cuh"
//     extern "C" __global__ void check(unsigned n, const float* r, float tol, gp_condition go)
//     {
//         ... one thread, once per launch:
//         if (threadIdx.x == 0 && blockIdx.x == 0) gp_set_condition(go, *r > tol);
//     }
//
// `gp_set_condition` is called by one thread, once per launch (the promise `unsafe kernels`
// makes for a `Condition` parameter): in a built graph it sets the conditional node's handle
// (`cudaGraphSetConditional`) and, for a loop, counts its iterations and stops it after its
// `max` with the condition still holding, marking the loop's state word so that the host
// reports `Error::IterationLimit`; in an eager step (no graph, `handle` 0) it only writes the
// value to `word[0]`, which the host reads back. An `if`'s or a switch's value goes to
// `word[0]` in a graph too (drivers before CUDA 12.8 decide an `else` or a switch from it); a
// loop's does not (nothing reads it).
//
// The words: `word[0]` the value; `word[1]` a loop's iterations so far; `word[2]` the count
// last written to the state word (host memory, which costs a trip across the bus to write:
// the count is written when it differs from the last one written, the limit's mark whenever a
// run stops at its maximum). A loop's test loads `word[1]` and `word[2]` together, and stores
// nothing before them; a kernel that stores before its test can load them at its start
// (`gp_condition_begin`, then `gp_set_condition_from`).
//
// The layout matches `ConditionBytes` in runtime/src/graph/kernel_set.rs (32 bytes, 8-aligned).
// runtime/kernels/conditions.cu is the library's own condition kernel, for conditions written
// as comparisons. Like it, this needs no -rdc: ptxas and the driver's JIT resolve
// `cudaGraphSetConditional` as a built-in. `gpu_pipeline::CONDITION_HEADER` holds this text,
// for CUDA C compiled at run time.
#ifndef GP_PIPELINE_CONDITION_CUH
#define GP_PIPELINE_CONDITION_CUH

struct gp_condition {
    unsigned long long handle;   // the conditional node's handle; 0 in an eager step
    unsigned int* word;          // word[0]: the value last set; word[1]: iterations so far;
                                 // word[2]: the count last written to `state`
    unsigned int* state;         // a loop's state word (host-mapped), or null
    unsigned int max_iterations; // a loop's maximum
    unsigned int flags;          // bit 0: the test before a loop's first iteration; bit 1: a loop
};

extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);

// A loop's words, as `gp_condition_begin` loaded them.
struct gp_condition_words {
    unsigned int running; // word[1]: the iterations so far
    unsigned int written; // word[2]: the count last written to `state`
};

// Loads a loop's words for a later `gp_set_condition_from` (nothing else writes them while a
// launch runs). A kernel whose body stores before it sets the condition calls this at its
// start, so that the loads go out beside its own instead of after its stores: one trip to
// memory fewer per iteration of a loop whose body and test are one kernel.
__device__ __forceinline__ gp_condition_words gp_condition_begin(gp_condition c)
{
    gp_condition_words w;
    w.running = c.word[1];
    w.written = c.word[2];
    return w;
}

// `gp_set_condition` with the words `gp_condition_begin` loaded at the kernel's start.
__device__ __forceinline__ void gp_set_condition_from(gp_condition c, gp_condition_words w,
                                                      unsigned int value)
{
    if (c.handle == 0ull || !(c.flags & 2u)) {
        c.word[0] = value;
        if (c.handle != 0ull) {
            cudaGraphSetConditional(c.handle, value);
        }
        return;
    }
    unsigned int done = (c.flags & 1u) ? 0u : w.running + 1u;
    bool limit = value != 0u && done >= c.max_iterations;
    if (limit) {
        value = 0u;
    }
    c.word[1] = value ? done : 0u;
    if (!value && c.state != 0) {
        if (limit || w.written != done) {
            volatile unsigned int* words = c.state;
            words[0] = done;
            c.word[2] = done;
            if (limit) {
                words[1] = 1u;
            }
        }
    }
    cudaGraphSetConditional(c.handle, value);
}

__device__ __forceinline__ void gp_set_condition(gp_condition c, unsigned int value)
{
    gp_set_condition_from(c, gp_condition_begin(c), value);
}

#endif
