//! 2-D Jacobi split in row blocks over ranks, one GPU each, with NCCL inside the captured
//! step. See `examples/src/jacobi_multi`.
//!
//! ```text
//! cargo build --release -p examples --example jacobi_multi
//! gpu-pipeline-launch -n 2 -- target/release/examples/jacobi_multi --nx 16384 --ny 16384
//! GPU_PIPELINE_BACKEND=cpu-checked cargo run -p examples --example jacobi_multi -- --ranks 4 --nx 64 --ny 64 --iterations 20
//! ```

fn main() -> std::process::ExitCode {
    examples::jacobi_multi::main()
}
