//! Heat diffusion on a band of rows: interior and boundary rows of one field computed
//! concurrently, ghost rows streamed in from the host every step. See `examples/src/halo`.
//!
//! ```text
//! cargo run --release -p examples --example halo -- --nx 4096 --ny 4096 --steps 1000
//! GPU_PIPELINE_BACKEND=cpu-checked cargo run -p examples --example halo -- --nx 64 --ny 32
//! ```

use examples::common::{backend_name, main_with};
use examples::halo::{self, HaloArgs};

fn main() -> std::process::ExitCode {
    main_with(HaloArgs::validate, HaloArgs::dot, |ctx, args| {
        println!(
            "halo: {}x{} band (+2 ghost rows), {} steps on {}",
            args.nx,
            args.ny,
            args.steps,
            backend_name(ctx)
        );
        let outcome = halo::run(ctx, args)?;
        Ok(outcome.report)
    })
}
