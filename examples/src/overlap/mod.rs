//! `overlap`: a large array processed in chunks, copy-in, compute and copy-out overlapped on
//! three streams, against the same work on one stream.
//!
//! The overlapped pipeline is software-pipelined: step `s` uploads chunk `s`, computes chunk
//! `s - 1` and downloads chunk `s - 2`, each on its own stream. The three stages share no
//! buffer (device buffers alternate between two slots), so the macro orders none of them and
//! `concurrent(upload, compute, download)` is verified at compile time:
//!
//! ```text
//! step:        0        1        2        3      ...
//! upload:    [in 0]   [in 1]   [in 2]   [in 3]
//! compute:            [k 0]    [k 1]    [k 2]
//! download:                    [out 0]  [out 1]
//! ```
//!
//! The first two and last two steps have no real chunk for some stages: those get
//! one-element stand-in buffers (and `n = 1` for the kernel), which cost a few microseconds.
//! Copies in a pipeline take whole buffers, so the host array is held as one pinned buffer
//! per chunk.

pub mod cpu;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, StepProfile, Stream, gpu_pipeline};

use crate::common::{BoxError, Check, Report, check_output_path, max_abs_diff, progress};

gpu_pipeline! {
    /// One chunk on one stream: copy in, compute, copy out, in order.
    pub pipeline SerialChunk {
        streams { main(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../kernels/overlap.ptx")) {
            fn transform(n: u32, iters: u32, a: f32, input: &[f32; n], output: &mut [f32; n])
                cpu = crate::overlap::cpu::transform;
        }
        params {
            n: u32,
            iters: u32,
            a: f32,
            src: &PinnedBuffer<f32>,
            d_in: &mut DeviceBuffer<f32>,
            d_out: &mut DeviceBuffer<f32>,
            dst: &mut PinnedBuffer<f32>,
        }
        stage upload on main { copy src -> d_in; }
        stage compute on main {
            launch k::transform(n, iters, a, d_in, d_out) grid n.div_ceil(256) block 256;
        }
        stage download on main { copy d_out -> dst; }
    }
}

gpu_pipeline! {
    /// One step of the software pipeline: upload chunk s, compute chunk s-1, download chunk
    /// s-2, on three streams at once.
    pub pipeline OverlapStep {
        streams { compute(priority = high), h2d(non_blocking), d2h(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../kernels/overlap.ptx")) {
            fn transform(n: u32, iters: u32, a: f32, input: &[f32; n], output: &mut [f32; n])
                cpu = crate::overlap::cpu::transform;
        }
        params {
            n: u32,
            iters: u32,
            a: f32,
            src: &PinnedBuffer<f32>,
            in_next: &mut DeviceBuffer<f32>,
            in_cur: &DeviceBuffer<f32>,
            out_cur: &mut DeviceBuffer<f32>,
            out_prev: &DeviceBuffer<f32>,
            dst: &mut PinnedBuffer<f32>,
        }
        stage upload on h2d { copy src -> in_next; }
        stage compute on compute {
            launch k::transform(n, iters, a, in_cur, out_cur) grid n.div_ceil(256) block 256;
        }
        stage download on d2h { copy out_prev -> dst; }
        concurrent(upload, compute, download);
    }
}

/// Flags of the `overlap` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "overlap",
    about = "Copy-in, compute and copy-out of a chunked array overlapped on three streams, \
             timed against one stream.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one.",
    allow_negative_numbers = true
)]
pub struct OverlapArgs {
    /// Elements (f32) of the array; a multiple of --chunks.
    #[arg(long, default_value_t = 1 << 24, value_parser = clap::value_parser!(u32).range(1..))]
    pub elements: u32,
    /// Number of chunks.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub chunks: u32,
    /// Arithmetic per element (iterations of y = y * a + x): raise it to make compute as
    /// long as the copies.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub iters: u32,
    /// Timed repetitions of each version (the best one counts).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    /// Print the stage graphs of both pipelines (`SerialChunk::DOT`, `OverlapStep::DOT`) in
    /// Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, run the three-stream version once more, profiling its middle step, and
    /// write that step's per-stage timings as a Chrome trace (open it in ui.perfetto.dev to
    /// see the copies overlap the kernel).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

impl OverlapArgs {
    /// The rules between flags: the chunks split the array evenly; the trace file can be
    /// written.
    pub fn validate(&self) -> Result<(), String> {
        if !self.elements.is_multiple_of(self.chunks) {
            return Err(format!(
                "--elements {} is not a multiple of --chunks {}",
                self.elements, self.chunks
            ));
        }
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The stage graphs `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        self.dot
            .then(|| format!("{}{}", SerialChunk::DOT, OverlapStep::DOT))
    }
}

/// The transform's factor (`y = y * A + x` converges to `2x`).
pub const A: f32 = 0.5;

/// The input: a deterministic ramp with some structure.
pub fn input(elements: u32) -> Vec<f32> {
    (0..elements)
        .map(|i| ((i % 1000) as f32) * 0.001 - 0.25)
        .collect()
}

/// What a run produced besides its report.
#[derive(Clone, Debug)]
pub struct OverlapOutcome {
    /// Backend, checks and timings.
    pub report: Report,
    /// Best time of the one-stream version.
    pub serial: Duration,
    /// Best time of the three-stream version.
    pub overlapped: Duration,
}

/// Device buffers of one slot pair and one-element stand-ins.
struct Slots {
    d_in: [DeviceBuffer<f32>; 2],
    d_out: [DeviceBuffer<f32>; 2],
}

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &OverlapArgs) -> Result<OverlapOutcome, BoxError> {
    args.validate()?;
    let mut report = Report::new(ctx);
    let chunk = (args.elements / args.chunks) as usize;
    let data = input(args.elements);

    let start = Instant::now();
    let src: Vec<PinnedBuffer<f32>> = data
        .chunks(chunk)
        .map(|c| PinnedBuffer::from_slice(ctx, c))
        .collect::<Result<_, _>>()?;
    let mut dst_serial: Vec<PinnedBuffer<f32>> = (0..args.chunks)
        .map(|_| PinnedBuffer::zeros(ctx, chunk))
        .collect::<Result<_, _>>()?;
    let mut dst_overlap = dst_serial
        .iter()
        .map(|_| PinnedBuffer::zeros(ctx, chunk))
        .collect::<Result<Vec<_>, _>>()?;
    let alloc = |len| DeviceBuffer::<f32>::alloc(ctx, len);
    let mut slots = Slots {
        d_in: [alloc(chunk)?, alloc(chunk)?],
        d_out: [alloc(chunk)?, alloc(chunk)?],
    };
    let mut serial = SerialChunk::new(ctx)?;
    let mut overlap = OverlapStep::new(ctx)?;
    report.timings.add(
        "setup",
        start.elapsed(),
        "pinned chunks, device slots, kernels",
    );

    let bar = progress(
        2 * u64::from(args.repeats) * u64::from(args.chunks),
        args.quiet,
        "chunks",
    );
    let mut best_serial = Duration::MAX;
    let mut best_overlap = Duration::MAX;
    for _ in 0..args.repeats {
        let start = Instant::now();
        for (s, d) in src.iter().zip(dst_serial.iter_mut()) {
            let [d_in, _] = &mut slots.d_in;
            let [d_out, _] = &mut slots.d_out;
            serial
                .run(SerialChunkParams {
                    n: chunk as u32,
                    iters: args.iters,
                    a: A,
                    src: s,
                    d_in,
                    d_out,
                    dst: d,
                })?
                .wait()?;
            bar.inc(1);
        }
        best_serial = best_serial.min(start.elapsed());

        let start = Instant::now();
        run_overlapped(
            ctx,
            &mut overlap,
            args,
            &src,
            &mut dst_overlap,
            &mut slots,
            &bar,
            None,
        )?;
        best_overlap = best_overlap.min(start.elapsed());
    }
    bar.finish_and_clear();

    let bytes = 2.0 * f64::from(args.elements) * 4.0;
    let rate = |d: Duration| format!("{:.2} GB/s (in + out)", bytes / d.as_secs_f64() / 1e9);
    let ratio = best_serial.as_secs_f64() / best_overlap.as_secs_f64();
    report
        .timings
        .add("serial (1 stream)", best_serial, rate(best_serial));
    report.timings.add(
        "overlapped (3 streams)",
        best_overlap,
        format!("{}, {ratio:.2}x the serial speed", rate(best_overlap)),
    );

    let start = Instant::now();
    let want: Vec<f32> = data
        .iter()
        .map(|&x| cpu::element(x, args.iters, A))
        .collect();
    let got_serial = concat(&dst_serial)?;
    let got_overlap = concat(&dst_overlap)?;
    report
        .timings
        .add("reference", start.elapsed(), "CPU, one thread");
    report.checks.push(Check::at_most(
        "serial output vs CPU reference",
        "max |error|",
        max_abs_diff(&got_serial, &want),
        1e-5,
    ));
    report.checks.push(Check::at_most(
        "overlapped output vs CPU reference",
        "max |error|",
        max_abs_diff(&got_overlap, &want),
        1e-5,
    ));
    report.checks.push(Check::no_races(ctx));

    if let Some(path) = &args.trace {
        let start = Instant::now();
        let middle = (args.chunks as usize).div_ceil(2);
        let profile = run_overlapped(
            ctx,
            &mut overlap,
            args,
            &src,
            &mut dst_overlap,
            &mut slots,
            &indicatif::ProgressBar::hidden(),
            Some(middle),
        )?
        .ok_or("the profiled step did not run")?;
        report.write_trace(path, &profile)?;
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }
    Ok(OverlapOutcome {
        report,
        serial: best_serial,
        overlapped: best_overlap,
    })
}

/// The software pipeline over all chunks: `chunks + 2` steps, stand-ins where a stage has no
/// chunk. The step numbered `profiled` (if any) runs under `profile`, whose timings it
/// returns.
#[allow(clippy::too_many_arguments)]
fn run_overlapped(
    ctx: &Context,
    pipeline: &mut OverlapStep,
    args: &OverlapArgs,
    src: &[PinnedBuffer<f32>],
    dst: &mut [PinnedBuffer<f32>],
    slots: &mut Slots,
    bar: &indicatif::ProgressBar,
    profiled: Option<usize>,
) -> Result<Option<StepProfile>, BoxError> {
    let chunks = src.len();
    let chunk = src[0].len() as u32;
    // One-element stand-ins for the stages of the first and last two steps.
    let setup = Stream::non_blocking(ctx)?;
    let stand_src = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut stand_dst = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut stand_in_next = DeviceBuffer::<f32>::zeros(&setup, 1)?;
    let stand_in_cur = DeviceBuffer::<f32>::zeros(&setup, 1)?;
    let mut stand_out_cur = DeviceBuffer::<f32>::zeros(&setup, 1)?;
    let stand_out_prev = DeviceBuffer::<f32>::zeros(&setup, 1)?;
    // The zeroing runs on `setup`; the pipeline's streams must not touch them before it ends.
    setup.synchronize()?;
    let mut profile = None;

    for s in 0..chunks + 2 {
        // Slot `s % 2` receives chunk s and holds chunk s-2's output; the other slot holds
        // chunk s-1's input and receives its output.
        let (in_a, in_b) = slots.d_in.split_at_mut(1);
        let (out_a, out_b) = slots.d_out.split_at_mut(1);
        let (in_next, in_cur, out_cur, out_prev) = if s % 2 == 0 {
            (&mut in_a[0], &in_b[0], &mut out_b[0], &out_a[0])
        } else {
            (&mut in_b[0], &in_a[0], &mut out_a[0], &out_b[0])
        };
        let upload = s < chunks;
        let compute = (1..=chunks).contains(&s);
        let download = s >= 2;
        let params = OverlapStepParams {
            n: if compute { chunk } else { 1 },
            iters: args.iters,
            a: A,
            src: if upload { &src[s] } else { &stand_src },
            in_next: if upload { in_next } else { &mut stand_in_next },
            in_cur: if compute { in_cur } else { &stand_in_cur },
            out_cur: if compute { out_cur } else { &mut stand_out_cur },
            out_prev: if download { out_prev } else { &stand_out_prev },
            dst: if download {
                &mut dst[s - 2]
            } else {
                &mut stand_dst
            },
        };
        if profiled == Some(s) {
            profile = Some(pipeline.profile(params)?);
        } else {
            pipeline.run(params)?.wait()?;
        }
        if compute {
            bar.inc(1);
        }
    }
    Ok(profile)
}

/// The chunks' contents, in order.
fn concat(chunks: &[PinnedBuffer<f32>]) -> Result<Vec<f32>, BoxError> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend_from_slice(&c.as_slice()?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transform_converges_to_twice_the_input() {
        let x = input(100);
        let mut y = vec![0.0; 100];
        cpu::transform(100, 40, A, &x, &mut y);
        for (x, y) in x.iter().zip(&y) {
            assert!((y - 2.0 * x).abs() < 1e-5, "{x} -> {y}");
            assert_eq!(*y, cpu::element(*x, 40, A));
        }
    }
}
