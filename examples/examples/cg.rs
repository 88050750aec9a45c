//! The 2-D Poisson equation by conjugate gradient, the whole solve in one device loop: two dot
//! products, the step scalars and the convergence test computed on the device every iteration.
//! See `examples/src/cg`.
//!
//! ```text
//! cargo run --release -p examples --example cg -- --nx 1024 --ny 1024 --tol 1e-8
//! GPU_PIPELINE_BACKEND=cpu-checked cargo run -p examples --example cg -- --nx 32 --ny 32
//! ```

use examples::cg::{self, CgArgs};
use examples::common::{backend_name, main_with};

fn main() -> std::process::ExitCode {
    main_with(CgArgs::validate, CgArgs::dot, |ctx, args| {
        println!(
            "cg: {}x{} Poisson problem to a relative residual of {:e} (at most {} iterations) on {}",
            args.nx,
            args.ny,
            args.tol,
            args.max_iters,
            backend_name(ctx)
        );
        let outcome = cg::run(ctx, args)?;
        println!(
            "{} iterations, relative residual {:.3e}, {:.2} µs per iteration",
            outcome.iterations,
            outcome.relative_residual,
            outcome.seconds_per_iteration() * 1e6
        );
        Ok(outcome.report)
    })
}
