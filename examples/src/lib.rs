//! The logic of the example programs in `examples/examples/`, as library functions so that
//! the integration tests (`examples/tests/`) run every example at a small size on the host
//! backend. Each example's `main` only parses flags, picks a backend and prints the report.
//!
//! | example | module | shows |
//! | --- | --- | --- |
//! | `heat2d` | [`heat2d`] | a time step as a two-stream pipeline, captured once, replayed N times, a scalar updated in place; memory bandwidth against the device's copy bandwidth |
//! | `nbody` | [`nbody`] | two kernels per step, positions streamed back to pinned memory behind the force kernel; speed against the classic tiled kernel launched with raw driver calls |
//! | `overlap` | [`overlap`] | copy-in, compute and copy-out of a chunked array on three streams against one stream |
//! | `interop` | [`interop`] | a stage that calls a library function with its typed stream; a borrowed foreign stream |
//! | `cublas` | [`cublas`] | cuBLAS SGEMM through cudarc in a captured step, between two of our kernels, replayed with scalars set in place |
//! | `jacobi_multi` | [`jacobi_multi`] | 2-D Jacobi split over ranks (one GPU each): halos exchanged with NCCL send/recv and the residual all-reduced inside the replayed graph; checked against one rank |
//! | `jacobi` | [`jacobi`] | a solver to a tolerance: one captured sweep, its grids swapped in place between replays, the residual read through the graph's window |
//! | `cg` | [`cg`] | conjugate gradient to a tolerance in one device loop: two dot products, the step scalars and the convergence test on the device every iteration |
//! | `stream_chunks` | [`stream_chunks`] | copy-in, compute, copy-out of one array in chunks (ranges of it) over a stream array, steps running ahead of each other; bandwidth against the two-way copy limit |
//! | `halo` | [`halo`] | the interior and boundary rows of one field computed concurrently (ranges), the boundary rows streamed in from the host through the window each replay |
//!
//! Every example takes `--help`, `--dot` (its stage graphs in Graphviz DOT) and `--trace PATH`
//! (one profiled step as a Chrome trace); [`common`] holds what they share. Every kernel is
//! CUDA C in `examples/kernels/*.cu`, embedded as PTX (`tools/build-ptx`), and has a CPU
//! implementation here (plain Rust over slices) that the CPU backend runs: called once per
//! launch with the whole slices. The CPU implementations of `heat2d`, `overlap` and
//! `interop` do the same arithmetic in the same order as their kernels, bit for bit; `nbody`'s
//! force kernel uses `rsqrtf`, so its backends agree within tolerances.

pub mod cg;
pub mod common;
pub mod cublas;
pub mod halo;
pub mod heat2d;
pub mod interop;
pub mod jacobi;
pub mod jacobi_multi;
pub mod nbody;
pub mod overlap;
pub mod stream_chunks;

#[cfg(test)]
mod tests {
    /// The examples' default context (CUDA device 0 when there is one, else the host
    /// backend) works where the tests run.
    #[test]
    fn the_default_backend_is_usable() {
        let ctx = gpu_pipeline::Context::auto().unwrap();
        ctx.synchronize().unwrap();
    }
}
