//! The logic of the example programs in `examples/examples/`, as library functions so that
//! the integration tests (`examples/tests/`) run every example at a small size on the host
//! backend. Each example's `main` only parses flags, picks a backend and prints the report.
//!
//! | example | module | shows |
//! | --- | --- | --- |
//! | `heat2d` | [`heat2d`] | a time step as a two-stream pipeline, captured once, replayed N times, a scalar updated in place |
//! | `nbody` | [`nbody`] | two kernels per step, positions streamed back to pinned memory behind the force kernel |
//! | `overlap` | [`overlap`] | copy-in, compute and copy-out of a chunked array on three streams against one stream |
//! | `interop` | [`interop`] | a stage that calls a library function with its typed stream; a borrowed foreign stream |
//!
//! Every kernel is CUDA C in `examples/kernels/*.cu`, embedded as PTX, and has a host
//! implementation here (plain Rust over slices, the same arithmetic in the same order) that
//! the host backend runs: called once per launch with the whole slices.

pub mod common;
pub mod heat2d;
pub mod interop;
pub mod nbody;
pub mod overlap;

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
