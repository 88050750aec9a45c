//! One array copied in, transformed and copied out in chunks over a stream array, passes
//! running ahead of each other. See `examples/src/stream_chunks`.
//!
//! ```text
//! cargo run --release -p examples --example stream_chunks -- --chunks 16 --streams 4
//! GPU_PIPELINE_BACKEND=cpu-checked cargo run -p examples --example stream_chunks -- --elements 4096
//! ```

use examples::common::{backend_name, format_bytes, main_with};
use examples::stream_chunks::{self, StreamChunksArgs};

fn main() -> std::process::ExitCode {
    main_with(
        StreamChunksArgs::validate,
        StreamChunksArgs::dot,
        |ctx, args| {
            println!(
                "stream_chunks: {} in {} chunks on {} streams, {} passes on {}",
                format_bytes(args.elements as usize * 4),
                args.chunks,
                args.streams,
                args.passes,
                backend_name(ctx)
            );
            let outcome = stream_chunks::run(ctx, args)?;
            println!(
                "{:.1} GB/s running ahead = {:.2} of the two-way copy limit ({:.1} GB/s)",
                outcome.achieved / 1e9,
                outcome.achieved / outcome.two_way_limit,
                outcome.two_way_limit / 1e9
            );
            Ok(outcome.report)
        },
    )
}
