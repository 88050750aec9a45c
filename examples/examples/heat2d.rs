//! Explicit 2-D heat diffusion as a captured two-stream pipeline. See `examples/src/heat2d`.
//!
//! ```text
//! cargo run --release -p examples --example heat2d -- --nx 512 --ny 512 --steps 4000
//! GPU_PIPELINE_BACKEND=host-checked cargo run -p examples --example heat2d -- --nx 64 --ny 64 --steps 100
//! ```

use clap::Parser;
use examples::common::{backend_name, context, finish};
use examples::heat2d::{self, Heat2dArgs, HeatStep};

fn main() -> std::process::ExitCode {
    let args = Heat2dArgs::parse();
    if args.dot {
        print!("{}", HeatStep::DOT);
        return std::process::ExitCode::SUCCESS;
    }
    finish(context().and_then(|ctx| {
        println!(
            "heat2d: {}x{} cells, {} steps on {}",
            args.nx,
            args.ny,
            args.steps,
            backend_name(&ctx)
        );
        for (k, phase) in heat2d::schedule(&args).iter().enumerate() {
            println!(
                "  phase {k}: alpha = {}, {} steps",
                phase.alpha,
                2 * phase.replays
            );
        }
        let outcome = heat2d::run(&ctx, &args)?;
        println!(
            "total heat at the end of each phase: {:?}",
            outcome.phase_heat
        );
        if !args.no_png {
            println!("wrote {}", args.png.display());
        }
        Ok(outcome.report)
    }))
}
