// The condition kernels of device-side `while` and `if` nodes (CUDA conditional graph nodes):
// runtime/src/cuda/graph/conditional.rs launches them; runtime/src/cpu/graph.rs implements
// the same decisions on the CPU backend. Compiled by tools/build-ptx; no -rdc is needed:
// cudaGraphSetConditional is resolved by ptxas (and the driver's JIT) as a built-in.
//
// Each kernel runs as one thread (grid 1, block 1), evaluates its condition and sets the
// conditional node's handle. Two families:
//
// - Specialised kernels, one per comparison and value type, which the usual forms use (CUDA
//   12.8+ drivers for `if`/`else` and switch): `gp_if_<op>_<type>` (also `gp_if_value`,
//   `gp_if_every`) decides an `if`, `if`/`else` or switch and does nothing else, as the
//   one-line setter kernel of NVIDIA's samples does; `gp_loop_<op>_<type>` (`gp_loop_value`,
//   `gp_loop_every`) decides a `while` or `do ... while` and counts its iterations
//   (`count_and_set`). No operation code is interpreted at run time.
// - The generic `gp_cond_<type>` kernels (the comparison passed as a number, the role as
//   flags), for ping-pong loops and for the several-IF forms of drivers before 12.8.
//
// `iterations` (the specialised kernels' `counter`) is device memory of the node's own:
// word 0 counts the iterations while the loop runs, word 1 keeps the count of the last run
// (ping-pong loops), word 2 the count last written to the state word. `state` is the loop's
// state word (8 bytes of device-mapped host memory that the host reads after the replay),
// written when the loop ends: state[0] the iterations it ran, state[1] set (and left set until
// the host clears it) when the condition still held after `max_iterations` iterations, which
// stops the loop instead of letting it run forever. Reading host memory from the device costs
// a trip across the bus, so no kernel ever does; writing it costs one too, so state[0] is only
// written when the count differs from the one written last (word 2: the host never changes
// state[0]), and state[1] whenever a run stops at its maximum. The writes are posted, and the
// launch's completion makes them visible to the host that synchronizes with it.
//
// Generic kernels' `flags`: bit 0 (`first`) set for the kernel before the node (0 iterations
// done), clear for the one at the end of each iteration of a loop's body; bit 1 negates the
// condition (the `else` of an `if`/`else` built from two IF nodes on drivers before 12.8). A
// `while` node runs the kernel before the node and at the end of each iteration; a do-while
// only at the end of each iteration (its handle starts each launch at 1, and the count starts
// at 0 because the kernel zeroes it whenever a loop ends); an `if`, `if`/`else` or switch
// once, before the node. `gp_cond_value` passes a `u32` through as the handle's value: a
// SWITCH node runs the body that value names, none when it is out of range.
//
// A ping-pong loop (a loop whose body swaps buffers, unrolled by two) is
// `K0 -> WHILE(body 0 -> Kmid -> IF(body 1) -> Kend) -> Kodd -> IF(after odd)`: Kmid counts
// and decides the IF like any closing kernel; Kend (bit 3, `after_middle`) stops the loop
// without counting when Kmid stopped it (the count is 0 then); `iterations[1]` keeps the
// count of the last run (0 when it stopped at its maximum: a failed step gets no fix-up, as
// an eager one does not), which Kodd (`gp_cond_every` on it, modulus 2, remainder 1, bit 4:
// decide only) reads to run the body after an odd count.

extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);

// The comparisons, numbered as `Comparison` in runtime/src/graph/control.rs.
template <typename T>
__device__ bool compare(T value, unsigned int op, T threshold)
{
    switch (op) {
    case 0: return value > threshold;
    case 1: return value >= threshold;
    case 2: return value < threshold;
    case 3: return value <= threshold;
    case 4: return value == threshold;
    default: return value != threshold;
    }
}

// A loop's end: state[0] = done unless `counter[2]` says it holds that already; state[1] set
// when the loop stopped at its maximum.
__device__ __forceinline__ void record(unsigned int* state, unsigned int* counter,
                                       unsigned int done, bool limit)
{
    if (limit || counter[2] != done) {
        volatile unsigned int* words = state;
        words[0] = done;
        counter[2] = done;
        if (limit) {
            words[1] = 1u;
        }
    }
}

__device__ void decide(unsigned long long handle, unsigned int go, unsigned int* state,
                       unsigned int* iterations, unsigned int max_iterations, unsigned int flags)
{
    if (flags & 2u) {
        go = go ? 0u : 1u;
    }
    if (flags & 16u) {
        cudaGraphSetConditional(handle, go);
        return;
    }
    if ((flags & 8u) && *iterations == 0u) {
        cudaGraphSetConditional(handle, 0u);
        return;
    }
    unsigned int done = (flags & 1u) ? 0u : *iterations + 1u;
    bool limit = go && done >= max_iterations;
    if (limit) {
        go = 0u;
    }
    *iterations = go ? done : 0u;
    if (!go) {
        iterations[1] = limit ? 0u : done;
        record(state, iterations, done, limit);
    }
    cudaGraphSetConditional(handle, go);
}

extern "C" __global__ void gp_cond_f32(unsigned long long handle, const float* value,
                                       float threshold, unsigned int op, unsigned int* state,
                                       unsigned int* iterations, unsigned int max_iterations,
                                       unsigned int flags)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    decide(handle, compare(*value, op, threshold) ? 1u : 0u, state, iterations, max_iterations,
           flags);
}

extern "C" __global__ void gp_cond_f64(unsigned long long handle, const double* value,
                                       double threshold, unsigned int op, unsigned int* state,
                                       unsigned int* iterations, unsigned int max_iterations,
                                       unsigned int flags)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    decide(handle, compare(*value, op, threshold) ? 1u : 0u, state, iterations, max_iterations,
           flags);
}

extern "C" __global__ void gp_cond_u32(unsigned long long handle, const unsigned int* value,
                                       unsigned int threshold, unsigned int op,
                                       unsigned int* state, unsigned int* iterations,
                                       unsigned int max_iterations, unsigned int flags)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    decide(handle, compare(*value, op, threshold) ? 1u : 0u, state, iterations, max_iterations,
           flags);
}

// `counter % modulus == remainder` on a counter word the host writes before each launch
// (modulus >= 1, checked by the host).
extern "C" __global__ void gp_cond_every(unsigned long long handle, const unsigned int* counter,
                                         unsigned int modulus, unsigned int remainder,
                                         unsigned int* state, unsigned int* iterations,
                                         unsigned int max_iterations, unsigned int flags)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    unsigned int n = *(volatile const unsigned int*)counter;
    decide(handle, n % modulus == remainder ? 1u : 0u, state, iterations, max_iterations, flags);
}

// The first element of `value` itself (`unused` and `op` keep the other kernels' layout).
extern "C" __global__ void gp_cond_value(unsigned long long handle, const unsigned int* value,
                                         unsigned int unused, unsigned int op,
                                         unsigned int* state, unsigned int* iterations,
                                         unsigned int max_iterations, unsigned int flags)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    decide(handle, *value, state, iterations, max_iterations, flags);
}

// The specialised kernels. A loop's count: `first` is 1 for the kernel before a `while` node
// (0 iterations done), 0 for the one ending each iteration of its body. The value and the
// counter words are loaded together, before anything is stored, so that the count costs no
// second trip to memory.
__device__ __forceinline__ void count_and_set(unsigned long long handle, bool holds,
                                              unsigned int* state, unsigned int* counter,
                                              unsigned int max_iterations, unsigned int first)
{
    unsigned int running = counter[0];
    unsigned int written = counter[2];
    unsigned int done = first ? 0u : running + 1u;
    bool limit = holds && done >= max_iterations;
    bool go = holds && !limit;
    counter[0] = go ? done : 0u;
    if (!go && (limit || written != done)) {
        volatile unsigned int* words = state;
        words[0] = done;
        counter[2] = done;
        if (limit) {
            words[1] = 1u;
        }
    }
    cudaGraphSetConditional(handle, go ? 1u : 0u);
}

#define GP_COMPARE_KERNELS(T, TYPE, NAME, OP)                                                   \
    extern "C" __global__ void gp_if_##NAME##_##TYPE(unsigned long long handle, const T* value, \
                                                     T threshold)                               \
    {                                                                                           \
        cudaGraphSetConditional(handle, *value OP threshold ? 1u : 0u);                         \
    }                                                                                           \
    extern "C" __global__ void gp_loop_##NAME##_##TYPE(                                         \
        unsigned long long handle, const T* value, T threshold, unsigned int* state,            \
        unsigned int* counter, unsigned int max_iterations, unsigned int first)                 \
    {                                                                                           \
        count_and_set(handle, *value OP threshold, state, counter, max_iterations, first);      \
    }

// The comparisons, named as `Comparison::suffix` in runtime/src/graph/control.rs names them.
#define GP_COMPARE_TYPE(T, TYPE)                                                                \
    GP_COMPARE_KERNELS(T, TYPE, gt, >)                                                          \
    GP_COMPARE_KERNELS(T, TYPE, ge, >=)                                                         \
    GP_COMPARE_KERNELS(T, TYPE, lt, <)                                                          \
    GP_COMPARE_KERNELS(T, TYPE, le, <=)                                                         \
    GP_COMPARE_KERNELS(T, TYPE, eq, ==)                                                         \
    GP_COMPARE_KERNELS(T, TYPE, ne, !=)

GP_COMPARE_TYPE(float, f32)
GP_COMPARE_TYPE(double, f64)
GP_COMPARE_TYPE(unsigned int, u32)

// The first element of `value` itself: non-zero holds; a SWITCH node runs the case it names.
extern "C" __global__ void gp_if_value(unsigned long long handle, const unsigned int* value)
{
    cudaGraphSetConditional(handle, *value);
}

extern "C" __global__ void gp_loop_value(unsigned long long handle, const unsigned int* value,
                                         unsigned int* state, unsigned int* counter,
                                         unsigned int max_iterations, unsigned int first)
{
    count_and_set(handle, *value != 0u, state, counter, max_iterations, first);
}

// `counter % modulus == remainder` on a word the host writes before each launch (modulus >= 1,
// checked by the host).
extern "C" __global__ void gp_if_every(unsigned long long handle, const unsigned int* flag,
                                       unsigned int modulus, unsigned int remainder)
{
    unsigned int n = *(volatile const unsigned int*)flag;
    cudaGraphSetConditional(handle, n % modulus == remainder ? 1u : 0u);
}

extern "C" __global__ void gp_loop_every(unsigned long long handle, const unsigned int* flag,
                                         unsigned int modulus, unsigned int remainder,
                                         unsigned int* state, unsigned int* counter,
                                         unsigned int max_iterations, unsigned int first)
{
    unsigned int n = *(volatile const unsigned int*)flag;
    count_and_set(handle, n % modulus == remainder, state, counter, max_iterations, first);
}
