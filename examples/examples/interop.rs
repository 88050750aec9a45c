//! A stage calling a library function with its typed stream, and a stream borrowed from a
//! raw handle. See `examples/src/interop.rs`.
//!
//! ```text
//! cargo run --release -p examples --example interop
//! ```

use examples::common::{backend_name, main_with};
use examples::interop::{self, InteropArgs};

fn main() -> std::process::ExitCode {
    main_with(InteropArgs::validate, InteropArgs::dot, |ctx, args| {
        println!(
            "interop: {} elements on {}",
            args.elements,
            backend_name(ctx)
        );
        Ok(interop::run(ctx, args)?.report)
    })
}
