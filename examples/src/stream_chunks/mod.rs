//! `stream_chunks`: one array copied in, transformed and copied out in `--chunks` chunks on
//! `--streams` streams, the passes running ahead of each other.
//!
//! The chunks are ranges of one pinned input, one device array and one pinned output; chunk
//! `i` runs on stream `lane[i % streams]`, in order: upload, compute, download. Different
//! chunks share no element, so no stage of one waits for another's: the only events are the
//! fork and join of a pass. Passes run ahead (`run_ahead`): chunk `i` of pass `k + 1` waits
//! only for what it conflicts with in pass `k` (chunk `i`, on its own stream), so while one
//! stream still downloads the last chunks of a pass the others upload the first chunks of
//! the next, and both copy engines stay busy:
//!
//! ```text
//! lane[0]: [up 0][k 0][down 0][up 4][k 4][down 4]... [up 0'][k 0'][down 0']...
//! lane[1]:   [up 1][k 1][down 1][up 5][k 5][down 5]...  [up 1'] ...
//! ```
//!
//! The run reports the bandwidth (bytes in + out per second) of passes that run ahead and of
//! closed passes, against the two-way copy limit (a host-to-device and a device-to-host copy
//! of the whole array at once) measured in the same run, and checks the output against a CPU
//! transform of the input.

pub mod host;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

use crate::common::{
    BoxError, Check, Report, check_output_path, float_in, format_bytes, max_abs_diff, progress,
};

gpu_pipeline! {
    /// One pass over the array: chunk `i` copied in, transformed in place and copied out on
    /// stream `lane[i % streams]`; the chunks are ranges of one array.
    pub pipeline ChunkPass {
        streams { main, lane[streams](non_blocking) }
        unsafe kernels k = ptx(include_str!("../../kernels/stream_chunks.ptx")) {
            fn transform(n: u32, iters: u32, a: f32, x: &mut [f32; n])
                cpu = crate::stream_chunks::host::transform;
        }
        params {
            streams: usize,
            chunks: usize,
            iters: u32,
            a: f32,
            input: &PinnedBuffer<f32>,
            x: &mut DeviceBuffer<f32>,
            output: &mut PinnedBuffer<f32>,
        }
        for i in 0..chunks {
            let size = x.len().div_ceil(chunks);
            let lo = (i * size).min(x.len());
            let hi = (lo + size).min(x.len());
            stage upload on lane[i % streams] { copy input[lo..hi] -> x[lo..hi]; }
            stage compute on lane[i % streams] {
                launch k::transform((hi - lo) as u32, iters, a, x[lo..hi])
                    grid ((hi - lo) as u32).div_ceil(256).max(1) block 256;
            }
            stage download on lane[i % streams] { copy x[lo..hi] -> output[lo..hi]; }
        }
    }
}

/// Flags of the `stream_chunks` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "stream_chunks",
    about = "Copy-in, compute and copy-out of one array in chunks over a stream array, the \
             passes running ahead of each other; bandwidth against the two-way copy limit, \
             output checked against a CPU reference.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one.",
    allow_negative_numbers = true
)]
pub struct StreamChunksArgs {
    /// Elements (f32) of the array.
    #[arg(long, default_value_t = 16 << 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub elements: u32,
    /// Chunks the array is split into (ranges of it).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub chunks: u32,
    /// Streams the chunks are spread over (chunk i on stream i % streams).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub streams: u32,
    /// Arithmetic per element (iterations of v = v * a + 1).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub iters: u32,
    /// The transform's factor `a`.
    #[arg(long, default_value_t = 0.5, value_parser = float_in((std::ops::Bound::Included(-1.0), std::ops::Bound::Included(1.0))))]
    pub a: f32,
    /// Passes per timed run (they run ahead of each other).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub passes: u32,
    /// Timed runs of each version (the best counts).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    /// Print the plan of one pass (every chunk's stages on its stream) in Graphviz DOT and
    /// exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more pass and write its per-stage timings as a Chrome trace
    /// (open it in ui.perfetto.dev to see the streams overlap).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

impl StreamChunksArgs {
    /// The rules clap cannot express: at least one element per chunk; a writable trace file.
    pub fn validate(&self) -> Result<(), String> {
        if self.elements < self.chunks {
            return Err(format!(
                "--elements {} is fewer than --chunks {}",
                self.elements, self.chunks
            ));
        }
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The plan of one pass `--dot` prints: drawn for the given chunks and streams on the
    /// CPU backend (the shape does not depend on the number of elements, so it is planned
    /// for a small array with one chunk per the same split).
    pub fn dot(&self) -> Option<String> {
        if !self.dot {
            return None;
        }
        let drawn = || -> Result<String, BoxError> {
            let ctx = Context::cpu();
            let elements = self.elements.min(self.chunks.saturating_mul(16)) as usize;
            let input = PinnedBuffer::<f32>::zeros(&ctx, elements)?;
            let mut output = PinnedBuffer::<f32>::zeros(&ctx, elements)?;
            let mut x = DeviceBuffer::<f32>::alloc(&ctx, elements)?;
            let mut pipeline = ChunkPass::new(&ctx)?;
            Ok(pipeline.plan_dot(&ChunkPassParams {
                streams: self.streams as usize,
                chunks: self.chunks as usize,
                iters: self.iters,
                a: self.a,
                input: &input,
                x: &mut x,
                output: &mut output,
            })?)
        };
        Some(
            drawn().unwrap_or_else(|e| {
                format!("// the plan could not be drawn: {e}\n{}", ChunkPass::DOT)
            }),
        )
    }
}

/// The input: a deterministic ramp in [-0.5, 0.5).
pub fn input(elements: u32) -> Vec<f32> {
    (0..elements)
        .map(|i| ((i % 1024) as f32) / 1024.0 - 0.5)
        .collect()
}

/// What a run produced besides its report.
#[derive(Clone, Debug)]
pub struct StreamChunksOutcome {
    /// Backend, checks and timings.
    pub report: Report,
    /// Best time of `--passes` passes that run ahead.
    pub ahead: Duration,
    /// Best time of `--passes` closed passes.
    pub closed: Duration,
    /// Bytes per second of the two-way copy limit (both directions at once).
    pub two_way_limit: f64,
    /// Bytes per second the passes that run ahead moved (in + out).
    pub achieved: f64,
}

/// The two-way copy limit: a host-to-device and a device-to-host copy of `elements` `f32`s at
/// once on two streams, best of `repeats`, in bytes (both directions) per second.
pub fn two_way_limit(ctx: &Context, elements: usize, repeats: u32) -> Result<f64, BoxError> {
    let (s1, s2) = (Stream::non_blocking(ctx)?, Stream::non_blocking(ctx)?);
    let host_in = PinnedBuffer::<f32>::zeros(ctx, elements)?;
    let mut host_out = PinnedBuffer::<f32>::zeros(ctx, elements)?;
    let mut dev_in = DeviceBuffer::<f32>::alloc(ctx, elements)?;
    let dev_out = DeviceBuffer::<f32>::zeros(&s2, elements)?;
    s2.synchronize()?;
    let mut best = Duration::MAX;
    for _ in 0..repeats + 1 {
        let start = Instant::now();
        s1.copy_htod(&host_in, &mut dev_in)?;
        s2.copy_dtoh(&dev_out, &mut host_out)?;
        s1.synchronize()?;
        s2.synchronize()?;
        best = best.min(start.elapsed());
    }
    Ok(2.0 * (elements * 4) as f64 / best.as_secs_f64().max(1e-9))
}

/// The params of one pass.
fn pass_params<'a>(
    args: &StreamChunksArgs,
    input: &'a PinnedBuffer<f32>,
    x: &'a mut DeviceBuffer<f32>,
    output: &'a mut PinnedBuffer<f32>,
) -> ChunkPassParams<'a> {
    ChunkPassParams {
        streams: args.streams as usize,
        chunks: args.chunks as usize,
        iters: args.iters,
        a: args.a,
        input,
        x,
        output,
    }
}

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &StreamChunksArgs) -> Result<StreamChunksOutcome, BoxError> {
    args.validate()?;
    let mut report = Report::new(ctx);
    let elements = args.elements as usize;
    let data = input(args.elements);

    let start = Instant::now();
    let input = PinnedBuffer::from_slice(ctx, &data)?;
    let mut output = PinnedBuffer::<f32>::zeros(ctx, elements)?;
    let mut x = DeviceBuffer::<f32>::alloc(ctx, elements)?;
    let mut pipeline = ChunkPass::new(ctx)?;
    pipeline.set_fault_tracking(false);
    report.timings.add(
        "setup",
        start.elapsed(),
        format!("{} in, device and out", format_bytes(elements * 4)),
    );

    let start = Instant::now();
    let limit = two_way_limit(ctx, elements, args.repeats)?;
    report.timings.add(
        "two-way copy limit",
        start.elapsed(),
        format!(
            "H2D + D2H of the whole array at once: {:.1} GB/s",
            limit / 1e9
        ),
    );

    let bar = progress(2 * u64::from(args.repeats), args.quiet, "runs");
    // A first pass plans the step, creates the streams and warms everything up.
    pipeline
        .run(pass_params(args, &input, &mut x, &mut output))?
        .wait()?;
    let (mut ahead, mut closed) = (Duration::MAX, Duration::MAX);
    let mut outputs_checked = 0;
    let want: Vec<f32> = data
        .iter()
        .map(|&v| host::element(v, args.iters, args.a))
        .collect();
    let mut worst = 0.0f64;
    for _ in 0..args.repeats {
        for run_ahead in [true, false] {
            output.as_mut_slice()?.fill(f32::NAN);
            let start = Instant::now();
            let run = if run_ahead {
                pipeline.run_ahead(
                    pass_params(args, &input, &mut x, &mut output),
                    args.passes as usize,
                )?
            } else {
                pipeline.run_steps(
                    pass_params(args, &input, &mut x, &mut output),
                    args.passes as usize,
                )?
            };
            run.wait()?;
            let elapsed = start.elapsed();
            if run_ahead {
                ahead = ahead.min(elapsed);
            } else {
                closed = closed.min(elapsed);
            }
            worst = worst.max(max_abs_diff(&output.to_vec()?, &want));
            outputs_checked += 1;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let bytes = 2.0 * (elements * 4) as f64 * f64::from(args.passes);
    let achieved = bytes / ahead.as_secs_f64().max(1e-9);
    let closed_rate = bytes / closed.as_secs_f64().max(1e-9);
    report.timings.add(
        "passes, running ahead",
        ahead,
        format!(
            "{} passes: {:.1} GB/s (in + out) = {:.2} of the two-way limit",
            args.passes,
            achieved / 1e9,
            achieved / limit
        ),
    );
    report.timings.add(
        "passes, closed",
        closed,
        format!(
            "{} passes: {:.1} GB/s = {:.2} of the two-way limit",
            args.passes,
            closed_rate / 1e9,
            closed_rate / limit
        ),
    );
    report.notes.push(format!(
        "{} chunks of {} on {} streams; passes that run ahead reach {:.2} of the two-way copy \
         limit ({:.1} GB/s), closed passes {:.2}",
        args.chunks,
        format_bytes(elements.div_ceil(args.chunks as usize) * 4),
        args.streams,
        achieved / limit,
        limit / 1e9,
        closed_rate / limit
    ));
    report.checks.push(Check::at_most(
        format!("output of every run ({outputs_checked}) vs CPU reference"),
        "max |error|",
        worst,
        0.0,
    ));
    report.checks.push(Check::no_races(ctx));

    if let Some(path) = &args.trace {
        let start = Instant::now();
        let profile = pipeline.profile(pass_params(args, &input, &mut x, &mut output))?;
        report.write_trace(path, &profile)?;
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }
    Ok(StreamChunksOutcome {
        report,
        ahead,
        closed,
        two_way_limit: limit,
        achieved,
    })
}

/// The benchmark's side of `stream_chunks`: `passes` passes of `elements` `f32`s in `chunks`
/// chunks on `streams` streams (`iters` of arithmetic each), running ahead or closed, best of
/// `repeats` after a warm-up pass; the output is checked against the CPU every time. Returns
/// the best time.
pub fn time_passes(
    ctx: &Context,
    elements: u32,
    chunks: u32,
    streams: u32,
    passes: u32,
    ahead: bool,
    repeats: u32,
) -> Result<Duration, BoxError> {
    let args = StreamChunksArgs::parse_from([
        "stream_chunks".to_owned(),
        format!("--elements={elements}"),
        format!("--chunks={chunks}"),
        format!("--streams={streams}"),
        format!("--passes={passes}"),
    ]);
    args.validate()?;
    let data = input(elements);
    let want: Vec<f32> = data
        .iter()
        .map(|&v| host::element(v, args.iters, args.a))
        .collect();
    let input = PinnedBuffer::from_slice(ctx, &data)?;
    let mut output = PinnedBuffer::<f32>::zeros(ctx, elements as usize)?;
    let mut x = DeviceBuffer::<f32>::alloc(ctx, elements as usize)?;
    let mut pipeline = ChunkPass::new(ctx)?;
    pipeline.set_fault_tracking(false);
    pipeline
        .run(pass_params(&args, &input, &mut x, &mut output))?
        .wait()?;
    let mut best = Duration::MAX;
    for _ in 0..repeats {
        output.as_mut_slice()?.fill(f32::NAN);
        let start = Instant::now();
        let params = pass_params(&args, &input, &mut x, &mut output);
        let run = if ahead {
            pipeline.run_ahead(params, passes as usize)?
        } else {
            pipeline.run_steps(params, passes as usize)?
        };
        run.wait()?;
        best = best.min(start.elapsed());
        if max_abs_diff(&output.to_vec()?, &want) != 0.0 {
            return Err("stream_chunks produced a wrong output".into());
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transform_is_the_kernels_arithmetic() {
        let mut x = vec![0.0, 1.0, -0.5];
        host::transform(2, 3, 0.5, &mut x);
        // 0 -> 1 -> 1.5 -> 1.75; 1 -> 1.5 -> 1.75 -> 1.875; the third is left alone.
        assert_eq!(x, [1.75, 1.875, -0.5]);
    }

    #[test]
    fn the_plan_of_a_pass_has_every_chunk_and_no_event_between_chunks() {
        let args = StreamChunksArgs::parse_from([
            "stream_chunks",
            "--chunks",
            "6",
            "--streams",
            "4",
            "--dot",
        ]);
        let dot = args.dot().unwrap();
        assert!(dot.contains("\"download[5]\""), "{dot}");
        assert!(dot.contains("label = \"lane[3]\""), "{dot}");
        assert!(!dot.contains("RAW"), "{dot}");
    }
}
