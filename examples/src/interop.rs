//! `interop`: gpu-pipeline next to other CUDA libraries.
//!
//! 1. A stage `call`s a plain Rust function with the stage's typed stream. The function here
//!    stands for a library call (cuBLAS, NCCL, your own crate): [`vendor::duplicate`] takes
//!    the `&TypedStream` of any pipeline stream, which offers only what a captured graph can
//!    replay (a library that takes a raw `CUstream` gets it from `TypedStream::handle`), and
//!    enqueues its own copy on it; the adapter [`duplicate_on_compute`] takes
//!    `&TypedStream<InteropCompute>`, so only the `compute` stream of an `Interop` pipeline
//!    can be passed to it (another stream is a type error).
//!    The stage lists what the call touches (`reads(input) writes(work)`), which is how the
//!    macro orders it against the other stages.
//! 2. Input produced on a stream that "another library" owns and hands over as a raw
//!    `CUstream`: borrowed with `unsafe { Stream::from_handle(&ctx, raw) }` (the library keeps
//!    ownership; the borrowed `Stream` does not destroy it), and the pipeline's origin stream
//!    waits for it before the step.
//!
//! On the CPU backend raw handles do not exist: streams are CPU queues, `Stream::handle` is
//! null and there is no foreign CUDA library to hand one over, so part 2 is skipped with a
//! message and the input is produced on an ordinary stream instead. Everything else runs.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use gpu_pipeline::{
    Backend, Context, DeviceBuffer, PinnedBuffer, Stream, TypedStream, gpu_pipeline,
};

use crate::common::{BoxError, Check, Report, check_output_path, max_abs_diff};

/// CPU implementation of `examples/kernels/interop.cu`.
pub mod cpu {
    /// `scale_offset(n, factor, offset, data)`: `data[i] = data[i] * factor + offset`.
    pub fn scale_offset(n: u32, factor: f32, offset: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v = *v * factor + offset;
        }
    }
}

/// Stand-ins for other libraries.
pub mod vendor {
    use gpu_pipeline::{Context, DeviceBuffer, Result, Stream, TypedStream, sys};

    /// A library function that enqueues its own work on the stream it is given, as cuBLAS or
    /// NCCL calls do: here `dst = src`, as a device-to-device copy. It takes a stream of any
    /// pipeline.
    pub fn duplicate<M>(
        stream: &TypedStream<'_, M>,
        src: &DeviceBuffer<f32>,
        dst: &mut DeviceBuffer<f32>,
    ) -> Result<()> {
        stream.copy_dtod(src, dst)
    }

    /// A library that owns a CUDA stream and hands out its raw handle.
    #[derive(Debug)]
    pub struct ForeignLibrary {
        stream: Stream,
    }

    impl ForeignLibrary {
        /// Creates the library's own stream.
        pub fn new(ctx: &Context) -> Result<ForeignLibrary> {
            Ok(ForeignLibrary {
                stream: Stream::non_blocking(ctx)?,
            })
        }

        /// The raw `CUstream`, valid while the library lives (`None` on the CPU backend,
        /// where the library is never created).
        pub fn raw_stream(&self) -> Option<sys::CUstream> {
            self.stream.handle()
        }
    }
}

gpu_pipeline! {
    /// A library call, a kernel and a copy back.
    pub pipeline Interop {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels k = ptx(include_str!("../kernels/interop.ptx")) {
            fn scale_offset(n: u32, factor: f32, offset: f32, data: &mut [f32; n])
                cpu = crate::interop::cpu::scale_offset;
        }
        params {
            n: u32,
            factor: f32,
            offset: f32,
            input: &DeviceBuffer<f32>,
            work: &mut DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        stage stage_in on compute {
            call crate::interop::duplicate_on_compute(input, work) reads(input) writes(work);
        }
        stage scale on compute {
            launch k::scale_offset(n, factor, offset, work) grid n.div_ceil(256) block 256;
        }
        stage download on copy {
            copy work -> out;
        }
    }
}

/// What the `call` in stage `stage_in` runs: the typed stream proves it is the `compute`
/// stream of an `Interop` pipeline.
pub fn duplicate_on_compute(
    stream: &TypedStream<'_, InteropCompute>,
    src: &DeviceBuffer<f32>,
    dst: &mut DeviceBuffer<f32>,
) -> gpu_pipeline::Result<()> {
    vendor::duplicate(stream, src, dst)
}

/// Flags of the `interop` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "interop",
    about = "A pipeline stage calling a library function with its typed stream, and input \
             produced on a foreign stream borrowed from a raw CUDA handle.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one.",
    allow_negative_numbers = true
)]
pub struct InteropArgs {
    /// Elements (f32) to process.
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub elements: u32,
    /// Print the stage graph of one step (`Interop::DOT`) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more step and write its per-stage timings as a Chrome
    /// trace (open it in ui.perfetto.dev).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Unused: the example is short (accepted for symmetry with the others).
    #[arg(long, short)]
    pub quiet: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

impl InteropArgs {
    /// The rules clap cannot express: the trace file can be written.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The stage graph `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        self.dot.then(|| Interop::DOT.to_owned())
    }
}

/// What a run produced besides its report.
#[derive(Clone, Debug)]
pub struct InteropOutcome {
    /// Backend, checks and timings.
    pub report: Report,
    /// Whether the input came through a stream borrowed from a raw handle (CUDA only).
    pub borrowed_foreign_stream: bool,
}

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &InteropArgs) -> Result<InteropOutcome, BoxError> {
    args.validate()?;
    let mut report = Report::new(ctx);
    let n = args.elements;
    let data: Vec<f32> = (0..n).map(|i| (i % 97) as f32 - 48.0).collect();
    let (factor, offset) = (1.5f32, 0.25f32);

    let start = Instant::now();
    let host_in = PinnedBuffer::from_slice(ctx, &data)?;
    let mut input = DeviceBuffer::<f32>::alloc(ctx, n as usize)?;
    let mut work = DeviceBuffer::<f32>::alloc(ctx, n as usize)?;
    let mut out = PinnedBuffer::<f32>::zeros(ctx, n as usize)?;
    let mut pipeline = Interop::new(ctx)?;
    report.timings.add("setup", start.elapsed(), "");

    // The producer: another library's stream on CUDA, an ordinary stream on the host.
    let foreign = match ctx.backend() {
        Backend::Cuda => Some(vendor::ForeignLibrary::new(ctx)?),
        Backend::Cpu => {
            println!(
                "CPU backend: skipping the borrowed foreign stream (raw CUDA stream handles \
                 do not exist here); the input is uploaded on an ordinary stream instead"
            );
            None
        }
    };
    let producer = match foreign.as_ref().and_then(|library| library.raw_stream()) {
        // SAFETY: `raw_stream` is a live stream of `ctx`'s context owned by `foreign`, which
        // outlives `producer` (declared after it, so dropped first), and nothing enqueued
        // through `producer` outlives it: the pipeline step below waits for everything.
        Some(raw) => unsafe { Stream::from_handle(ctx, raw) }?,
        None => Stream::non_blocking(ctx)?,
    };

    let start = Instant::now();
    producer.copy_htod(&host_in, &mut input)?;
    // The step's origin stream waits for the producer; the macro's fork carries that to the
    // pipeline's other stream.
    pipeline.compute_stream().join(&producer)?;
    pipeline
        .run(InteropParams {
            n,
            factor,
            offset,
            input: &input,
            work: &mut work,
            out: &mut out,
        })?
        .wait()?;
    report
        .timings
        .add("step", start.elapsed(), "upload, call, kernel, copy back");

    let want: Vec<f32> = data.iter().map(|&x| x * factor + offset).collect();
    report.checks.push(Check::at_most(
        "output vs CPU reference",
        "max |error|",
        max_abs_diff(&out.as_slice()?, &want),
        0.0,
    ));
    report.checks.push(Check {
        name: "producer stream".to_owned(),
        detail: if foreign.is_some() {
            format!(
                "borrowed from a raw handle (is_borrowed = {})",
                producer.is_borrowed()
            )
        } else {
            "CPU backend: ordinary stream (no raw handles)".to_owned()
        },
        passed: foreign.is_none() || producer.is_borrowed(),
    });
    report.checks.push(Check::no_races(ctx));
    let borrowed_foreign_stream = foreign.is_some();
    drop(producer);

    if let Some(path) = &args.trace {
        // After the checks: the profiled step scales `work` once more.
        let start = Instant::now();
        let profile = pipeline.profile(InteropParams {
            n,
            factor,
            offset,
            input: &input,
            work: &mut work,
            out: &mut out,
        })?;
        report.write_trace(path, &profile)?;
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }
    Ok(InteropOutcome {
        report,
        borrowed_foreign_stream,
    })
}
