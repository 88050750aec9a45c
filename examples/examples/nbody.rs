//! All-pairs N-body leapfrog as a captured two-stream pipeline, compared with the classic
//! tiled kernel launched with raw driver calls. See `examples/src/nbody`.
//!
//! ```text
//! cargo run --release -p examples --example nbody -- --bodies 65536 --steps 50
//! GPU_PIPELINE_BACKEND=cpu-checked cargo run -p examples --example nbody -- --bodies 128 --steps 20
//! ```

use examples::common::{backend_name, main_with};
use examples::nbody::{self, NbodyArgs};

fn main() -> std::process::ExitCode {
    main_with(NbodyArgs::validate, NbodyArgs::dot, |ctx, args| {
        println!(
            "nbody: {} bodies, {} steps of dt = {}, sampled every {} on {}",
            args.bodies,
            args.steps,
            args.dt,
            args.sample_every,
            backend_name(ctx)
        );
        let outcome = nbody::run(ctx, args)?;
        println!(
            "{} position samples streamed back; momentum drift {:.2e}",
            outcome.samples.len(),
            outcome.momentum_drift
        );
        Ok(outcome.report)
    })
}
