//! A stage calling a library function with its typed stream, and a stream borrowed from a
//! raw handle. See `examples/src/interop.rs`.
//!
//! ```text
//! cargo run --release -p examples --example interop
//! ```

use clap::Parser;
use examples::common::{backend_name, context, finish};
use examples::interop::{self, InteropArgs};

fn main() -> std::process::ExitCode {
    let args = InteropArgs::parse();
    finish(context().and_then(|ctx| {
        println!(
            "interop: {} elements on {}",
            args.elements,
            backend_name(&ctx)
        );
        Ok(interop::run(&ctx, &args)?.report)
    }))
}
