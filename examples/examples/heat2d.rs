//! Explicit 2-D heat diffusion as a captured two-stream pipeline. See `examples/src/heat2d`.
//!
//! ```text
//! cargo run --release -p examples --example heat2d -- --nx 4096 --ny 4096 --steps 2000 --no-png
//! GPU_PIPELINE_BACKEND=cpu-checked cargo run -p examples --example heat2d -- --nx 64 --ny 64 --steps 100
//! ```

use examples::common::{backend_name, main_with};
use examples::heat2d::{self, Heat2dArgs};

fn main() -> std::process::ExitCode {
    main_with(Heat2dArgs::validate, Heat2dArgs::dot, |ctx, args| {
        println!(
            "heat2d: {}x{} cells, {} steps on {}",
            args.nx,
            args.ny,
            args.steps,
            backend_name(ctx)
        );
        for (k, phase) in heat2d::schedule(args).iter().enumerate() {
            println!(
                "  phase {k}: alpha = {}, {} steps",
                phase.alpha,
                2 * phase.replays
            );
        }
        let outcome = heat2d::run(ctx, args)?;
        println!(
            "total heat at the end of each phase: {:?}",
            outcome.phase_heat
        );
        Ok(outcome.report)
    })
}
