// The condition kernels of device-side `while` and `if` nodes (CUDA conditional graph nodes):
// runtime/src/cuda/graph/conditional.rs launches them; runtime/src/cpu/graph.rs implements
// the same decisions on the CPU backend. Compiled by tools/build-ptx; no -rdc is needed:
// cudaGraphSetConditional is resolved by ptxas (and the driver's JIT) as a built-in.
//
// Each kernel runs as one thread (grid 1, block 1), evaluates its condition and sets the
// conditional node's handle. `iterations` is device memory of the node's own where the
// iterations are counted while the loop runs. `state` is the loop's state word (8 bytes of
// device-mapped host memory that the host reads after the replay), written once, when the
// loop ends: state[0] the iterations it ran, state[1] set (and left set until the host clears
// it) when the condition still held after `max_iterations` iterations, which stops the loop
// instead of letting it run forever. Reading host memory from the device costs a trip across
// the bus, so the loop never does; the writes are posted, and the launch's completion makes
// them visible to the host that synchronizes with it.
//
// `flags`: bit 0 (`first`) set for the kernel before the node (0 iterations done), clear for
// the one at the end of each iteration of a loop's body; bit 1 negates the condition (the
// `else` of an `if`/`else` built from two IF nodes on drivers before 12.8). A `while` node
// runs the kernel before the node and at the end of each iteration; a do-while only at the
// end of each iteration (its handle starts each launch at 1, and the count starts at 0
// because the kernel zeroes it whenever a loop ends); an `if`, `if`/`else` or switch once,
// before the node. `gp_cond_value` passes a `u32` through as the handle's value: a SWITCH
// node runs the body that value names, none when it is out of range.
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
        volatile unsigned int* words = state;
        words[0] = done;
        if (limit) {
            words[1] = 1u;
        }
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
