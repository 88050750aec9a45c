//! The 2-D Laplace equation by Jacobi iteration: one captured sweep replayed with its grids
//! swapped in place and its residual read between replays, or (`--device-loop`) the whole
//! solve as one launch of a device `while` loop. See `examples/src/jacobi`.
//!
//! ```text
//! cargo run --release -p examples --example jacobi -- --nx 4096 --ny 4096 --tol 1e-3
//! cargo run --release -p examples --example jacobi -- --nx 512 --ny 512 --tol 1e-4 --device-loop
//! GPU_PIPELINE_BACKEND=cpu-checked cargo run -p examples --example jacobi -- --nx 64 --ny 64
//! ```

use examples::common::{backend_name, main_with};
use examples::jacobi::{self, JacobiArgs};

fn main() -> std::process::ExitCode {
    main_with(JacobiArgs::validate, JacobiArgs::dot, |ctx, args| {
        println!(
            "jacobi: {}x{} grid to a residual below {:e} (at most {} sweeps{}) on {}",
            args.nx,
            args.ny,
            args.tol,
            args.max_iters,
            if args.device_loop {
                ", in pairs, by a device loop"
            } else {
                ""
            },
            backend_name(ctx)
        );
        let outcome = jacobi::run(ctx, args)?;
        println!(
            "{} sweeps, residual {:.3e}, {:.2} µs per sweep",
            outcome.iterations,
            outcome.residual,
            outcome.seconds_per_iteration * 1e6
        );
        Ok(outcome.report)
    })
}
