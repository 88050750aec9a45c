//! Copy-in, compute and copy-out overlapped on three streams, against one stream. See
//! `examples/src/overlap`.
//!
//! ```text
//! cargo run --release -p examples --example overlap -- --elements 67108864 --chunks 32 --iters 64
//! ```

use examples::common::{backend_name, main_with};
use examples::overlap::{self, OverlapArgs};

fn main() -> std::process::ExitCode {
    main_with(OverlapArgs::validate, OverlapArgs::dot, |ctx, args| {
        println!(
            "overlap: {} elements in {} chunks, {} iterations per element on {}",
            args.elements,
            args.chunks,
            args.iters,
            backend_name(ctx)
        );
        Ok(overlap::run(ctx, args)?.report)
    })
}
