//! `heat2d`: explicit 2-D heat diffusion, the main example.
//!
//! One replay of the captured graph advances two time steps, ping-ponging between two fields,
//! and streams a preview of the intermediate field back to the host:
//!
//! ```text
//! compute (high priority):  forward: field -> next ──────────────────▶ back: next -> field
//!                                         │
//! copy:                                   └─ save: next -> preview -> snapshot (pinned)
//! ```
//!
//! `save` samples every `--preview-stride`-th cell of `next` (a kernel) and copies the preview
//! to pinned memory, after `forward` wrote `next` (one event) and concurrently with `back`,
//! which also only reads `next` (the macro verifies the `concurrent(save, back)` claim). The
//! origin stream `compute` joins `copy` at the end of the step, so the next replay's `forward`
//! cannot overwrite `next` while `save` still reads it. The preview is what a live view would
//! stream; copying the whole field every two steps would make the step as slow as PCIe
//! (`--preview-stride 1` does, to see it). The time step grows in phases (the field smooths,
//! so a larger `alpha = kappa dt / h^2` stays accurate); each phase sets `alpha` in the
//! instantiated graph in place with the generated `set_alpha`.
//!
//! The step is bound by memory bandwidth (8 bytes per cell: one read, one write), so the run
//! reports the bandwidth it achieved against the device's own device-to-device copy,
//! measured in the same run. The checks cost the same at any step count unless the whole
//! run is replayed on the CPU (`--reference`): the last step of every cell against a CPU
//! step of the field before it, the preview against the field it samples, and the total
//! heat, which insulated walls conserve, at the end of every phase.

pub mod cpu;

use std::ops::Bound;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

use crate::common::{
    BoxError, Check, ReferenceMode, Report, check_cpu_cost, check_output_path, copy_bandwidth,
    cpu_threads, format_bytes, max_abs_diff, par_chunks, parse_float, progress,
};

gpu_pipeline! {
    /// Two explicit Euler steps of 2-D heat diffusion (`field -> next -> field`), with a
    /// preview of the intermediate field copied back to pinned memory while the second step
    /// runs.
    pub pipeline HeatStep {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels heat = ptx(include_str!("../../kernels/heat2d.ptx")) {
            // Each indexes its buffers only below the bounds stated (an `nx` by `ny` field, an
            // `mx` by `my` preview): the runtime checks that the buffers passed are that long
            // before every step, capture and setter.
            fn heat_step(nx: u32, ny: u32, alpha: f32, src: &[f32; nx * ny],
                         dst: &mut [f32; nx * ny])
                cpu = crate::heat2d::cpu::heat_step;
            fn sample(nx: u32, ny: u32, stride: u32, mx: u32, my: u32, src: &[f32; nx * ny],
                      dst: &mut [f32; mx * my])
                cpu = crate::heat2d::cpu::sample;
        }
        params {
            nx: u32,
            ny: u32,
            alpha: f32,
            stride: u32,
            mx: u32,
            my: u32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            preview: &mut DeviceBuffer<f32>,
            snapshot: &mut PinnedBuffer<f32>,
        }
        // 32x8 threads a block, each thread 4 rows (HEAT_ROWS in the kernel): 32x32 cells.
        stage forward on compute {
            launch heat::heat_step(nx, ny, alpha, field, next)
                grid (nx.div_ceil(32), ny.div_ceil(32)) block (32u32, 8u32);
        }
        stage save on copy {
            launch heat::sample(nx, ny, stride, mx, my, next, preview)
                grid (mx.div_ceil(32), my.div_ceil(8)) block (32u32, 8u32);
            copy preview -> snapshot;
        }
        stage back on compute {
            launch heat::heat_step(nx, ny, alpha, next, field)
                grid (nx.div_ceil(32), ny.div_ceil(32)) block (32u32, 8u32);
        }
        concurrent(save, back);
    }
}

/// Flags of the `heat2d` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "heat2d",
    about = "Explicit 2-D heat diffusion: one time step as a two-stream gpu-pipeline, captured \
             once as a graph and replayed, checked against a CPU reference; reports the memory \
             bandwidth achieved against the device's copy bandwidth.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one.",
    allow_negative_numbers = true
)]
pub struct Heat2dArgs {
    /// Grid width in cells.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(2..=16384))]
    pub nx: u32,
    /// Grid height in cells.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(2..=16384))]
    pub ny: u32,
    /// Time steps (even: one graph replay advances two).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(2..))]
    pub steps: u32,
    /// Phases of the run; the time step doubles from one phase to the next.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub phases: u32,
    /// `alpha = kappa dt / h^2` of the last phase (stable up to 0.25).
    #[arg(long, default_value_t = 0.2, value_parser = parse_alpha, allow_hyphen_values = true)]
    pub alpha: f32,
    /// The preview streamed back every replay holds every this-many-th cell in each
    /// direction (1: the whole field, which makes the step as slow as PCIe).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub preview_stride: u32,
    /// How much of the run to replay on the CPU: `auto` replays all of it when that costs at
    /// most 4e9 cell updates, else only the checks whose cost does not grow with --steps.
    #[arg(long, value_enum, default_value_t = ReferenceMode::Auto)]
    pub reference: ReferenceMode,
    /// Where to write the final field as a PNG heat map.
    #[arg(long, default_value = "heat2d.png", conflicts_with = "no_png")]
    pub png: PathBuf,
    /// Do not write the PNG.
    #[arg(long)]
    pub no_png: bool,
    /// Print the stage graph of one step (`HeatStep::DOT`) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more step and write its per-stage timings as a Chrome
    /// trace (open it in ui.perfetto.dev to see the two streams).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Turn the pipeline's fault tracking on: an asynchronous fault then names the first stage
    /// that did not complete, at the cost of one stream memory operation per stage and one
    /// reset per replay (off by default: a fault names the pipeline only).
    #[arg(long)]
    pub track_faults: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Run on the CPU backend even when the estimated time is over two minutes.
    #[arg(long)]
    pub cpu_anyway: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

fn parse_alpha(s: &str) -> Result<f32, String> {
    parse_float(s, (Bound::Excluded(0.0), Bound::Included(0.25))).map_err(|e| {
        match s.trim().parse::<f32>() {
            Ok(alpha) if alpha.is_finite() && alpha > 0.25 => {
                format!("{e}; the explicit scheme is unstable above 0.25")
            }
            _ => e,
        }
    })
}

/// Cell updates a second one CPU core gets through (a generous guess: the estimate errs
/// short).
const CPU_CELLS_PER_CORE: f64 = 1e9;

impl Heat2dArgs {
    /// The rules clap cannot express: an even step count, writable output files.
    pub fn validate(&self) -> Result<(), String> {
        if !self.steps.is_multiple_of(2) {
            return Err(format!(
                "--steps {} is odd; one replay advances two steps",
                self.steps
            ));
        }
        if !self.no_png {
            check_output_path("--png", &self.png)?;
        }
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The stage graph `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        self.dot.then(|| HeatStep::DOT.to_owned())
    }
}

/// One phase of the schedule: `replays` graph launches (two steps each) at `alpha`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phase {
    /// `kappa dt / h^2` in this phase.
    pub alpha: f32,
    /// Graph replays (two time steps each).
    pub replays: u32,
}

/// The schedule: `alpha` doubles from phase to phase up to `args.alpha`; the replays are
/// shared out as evenly as possible (earlier phases get the remainder).
pub fn schedule(args: &Heat2dArgs) -> Vec<Phase> {
    let replays = (args.steps / 2).max(1);
    let phases = args.phases.min(replays).max(1);
    (0..phases)
        .map(|k| Phase {
            alpha: args.alpha / (1u32 << (phases - 1 - k)) as f32,
            replays: replays / phases + u32::from(k < replays % phases),
        })
        .collect()
}

/// The initial temperature: two hot discs and a warm band on a cold plate.
pub fn initial_field(nx: u32, ny: u32) -> Vec<f32> {
    let (fx, fy) = (nx as f32, ny as f32);
    let r = 0.12 * fx.min(fy);
    let mut field = vec![0.0f32; nx as usize * ny as usize];
    par_chunks(&mut field, nx as usize, |first, rows| {
        for (k, row) in rows.chunks_mut(nx as usize).enumerate() {
            let py = (first / nx as usize + k) as f32 + 0.5;
            for (x, cell) in row.iter_mut().enumerate() {
                let px = x as f32 + 0.5;
                let in_disc = |cx: f32, cy: f32| (px - cx).powi(2) + (py - cy).powi(2) <= r * r;
                *cell = if in_disc(0.3 * fx, 0.35 * fy) {
                    100.0
                } else if in_disc(0.7 * fx, 0.65 * fy) {
                    60.0
                } else if (py - 0.85 * fy).abs() < 0.04 * fy {
                    25.0
                } else {
                    0.0
                };
            }
        }
    });
    field
}

/// The total heat (sum of cell temperatures), in f64 so that the sum itself adds no drift.
pub fn total_heat(field: &[f32]) -> f64 {
    field.iter().map(|&t| f64::from(t)).sum()
}

/// One explicit step of the CPU reference, `src -> dst`, rows spread over all cores. Written
/// apart from the kernel's CPU implementation (which the CPU backend runs), sharing only
/// the arithmetic of one cell.
pub fn reference_step(src: &[f32], dst: &mut [f32], nx: u32, ny: u32, alpha: f32) {
    let (nx, ny) = (nx as usize, ny as usize);
    par_chunks(dst, nx, |first, rows| {
        for (k, row) in rows.chunks_mut(nx).enumerate() {
            let y = first / nx + k;
            for (x, out) in row.iter_mut().enumerate() {
                *out = cpu::cell(src, nx, ny, x, y, alpha);
            }
        }
    });
}

/// The CPU reference: `steps` explicit steps of `field` in place.
pub fn reference_steps(field: &mut Vec<f32>, nx: u32, ny: u32, alpha: f32, steps: u32) {
    let mut next = vec![0.0f32; field.len()];
    for _ in 0..steps {
        reference_step(field, &mut next, nx, ny, alpha);
        std::mem::swap(field, &mut next);
    }
}

/// What a run produced besides its report.
#[derive(Clone, Debug)]
pub struct Heat2dOutcome {
    /// Backend, checks and timings.
    pub report: Report,
    /// The final field (after `steps` steps), row-major.
    pub field: Vec<f32>,
    /// The total heat at the end of each phase.
    pub phase_heat: Vec<f64>,
    /// Whether the whole run was replayed on the CPU and compared.
    pub full_reference: bool,
    /// Bytes per second the replays moved (8 per cell and step).
    pub achieved_bandwidth: f64,
    /// Bytes per second of a device-to-device copy of one field, measured in the same run.
    pub copy_bandwidth: f64,
}

/// Runs the example: `args.steps` steps on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &Heat2dArgs) -> Result<Heat2dOutcome, BoxError> {
    args.validate()?;
    let (nx, ny) = (args.nx, args.ny);
    let cells = nx as usize * ny as usize;
    let updates = cells as f64 * f64::from(args.steps);
    check_cpu_cost(
        ctx,
        args.cpu_anyway,
        updates,
        CPU_CELLS_PER_CORE,
        "cell updates",
    )?;
    let mut report = Report::new(ctx);
    let phases = schedule(args);
    let last_alpha = phases[phases.len() - 1].alpha;
    let stride = args.preview_stride;
    let (mx, my) = cpu::preview_size(nx, ny, stride);
    let init = initial_field(nx, ny);
    let heat0 = total_heat(&init);

    // Setup: both fields uploaded, the preview on the device and in pinned memory, the
    // pipeline's streams and kernels.
    let start = Instant::now();
    let setup = Stream::non_blocking(ctx)?;
    let mut field = DeviceBuffer::from_slice(&setup, &init)?;
    let mut next = DeviceBuffer::from_slice(&setup, &init)?;
    let mut preview = DeviceBuffer::<f32>::zeros(&setup, (mx * my) as usize)?;
    let mut snapshot = PinnedBuffer::<f32>::zeros(ctx, (mx * my) as usize)?;
    // The pipeline's streams must not touch the buffers before the setup stream is done.
    setup.synchronize()?;
    let mut pipeline = HeatStep::new(ctx)?;
    pipeline.set_fault_tracking(args.track_faults);
    report
        .timings
        .add("setup", start.elapsed(), "alloc, upload, load kernels");

    // The yardstick: a device-to-device copy of buffers the size of one field, timed with
    // events.
    let start = Instant::now();
    let copy_bw = copy_bandwidth(ctx, cells * 4)?;
    report.timings.add(
        "copy bandwidth",
        start.elapsed(),
        format!(
            "device-to-device copy of {}: {:.1} GB/s",
            format_bytes(cells * 4),
            copy_bw / 1e9
        ),
    );

    let start = Instant::now();
    let mut graph = pipeline.capture(HeatStepParams {
        nx,
        ny,
        alpha: phases[0].alpha,
        stride,
        mx,
        my,
        field: &mut field,
        next: &mut next,
        preview: &mut preview,
        snapshot: &mut snapshot,
    })?;
    let note = match graph.node_count() {
        Ok(n) => format!("{n} graph nodes"),
        Err(_) => String::new(),
    };
    report.timings.add("capture", start.elapsed(), note);

    // The replays, phase by phase. The host waits at the end of each phase (and, when the
    // progress bar shows, at every ~1%); between those the launches queue up on the device.
    // Only the replays are timed, not the reading of the field at the end of each phase.
    // The graph's work goes to the device before the clock starts (on CUDA; the CPU backend
    // has none), so the first replay costs what the others do.
    if let Some(exec) = graph.exec() {
        exec.upload(&setup)?;
        setup.synchronize()?;
    }
    let bar = progress(u64::from(args.steps), args.quiet, "steps");
    let tick = (args.steps / 200).max(1);
    let mut phase_heat = Vec::with_capacity(phases.len());
    let mut replay_time = Duration::ZERO;
    let mut result = Vec::new();
    for phase in &phases {
        graph.set_alpha(phase.alpha)?;
        let start = Instant::now();
        for r in 0..phase.replays {
            graph.launch()?;
            if !bar.is_hidden() && (r + 1) % tick == 0 {
                graph.synchronize()?;
                bar.inc(2 * u64::from(tick));
            }
        }
        graph.synchronize()?;
        replay_time += start.elapsed();
        result = graph.params().field.to_vec(&setup)?;
        phase_heat.push(total_heat(&result));
    }
    bar.finish_and_clear();
    let updates = f64::from(args.steps) * cells as f64;
    let achieved_bw = 8.0 * updates / replay_time.as_secs_f64();
    report.timings.add(
        "replays",
        replay_time,
        format!(
            "{} steps, {:.1} Mcell-steps/s, {:.1} GB/s",
            args.steps,
            updates / replay_time.as_secs_f64() / 1e6,
            achieved_bw / 1e9
        ),
    );
    report.notes.push(format!(
        "memory bandwidth: {:.1} GB/s achieved by the replays (8 bytes per cell and step) = \
         {:.2} of the device-to-device copy ({:.1} GB/s)",
        achieved_bw / 1e9,
        achieved_bw / copy_bw,
        copy_bw / 1e9
    ));
    // The last replay's `forward` left the field one step before the end in `next`, and
    // `save` its preview in the snapshot.
    let before_last = graph.params().next.to_vec(&setup)?;
    let snap = graph.params().snapshot.to_vec()?;
    drop(graph);

    let start = Instant::now();
    let mut want_last = vec![0.0f32; cells];
    reference_step(&before_last, &mut want_last, nx, ny, last_alpha);
    report.checks.push(Check::at_most(
        "last step vs a CPU step of the field before it (every cell)",
        "max |error|",
        max_abs_diff(&result, &want_last),
        1e-5,
    ));
    let mut want_preview = vec![0.0f32; snap.len()];
    cpu::sample(nx, ny, stride, mx, my, &before_last, &mut want_preview);
    report.checks.push(Check::at_most(
        format!("preview (every {stride}th cell) vs the field it samples"),
        "max |error|",
        max_abs_diff(&snap, &want_preview),
        0.0,
    ));
    // Insulated walls: no heat leaves, so the total is conserved up to f32 rounding.
    let drift = phase_heat
        .iter()
        .map(|h| (h - heat0).abs() / heat0)
        .fold(0.0, f64::max);
    report.checks.push(Check::at_most(
        "energy bookkeeping (total heat, every phase)",
        "max relative drift",
        drift,
        1e-4,
    ));

    let full_reference = args.reference.full(updates);
    let note = if full_reference {
        // The same schedule on the CPU. f32 rounding agrees bit for bit (no FMA on either
        // side); the limit leaves room for a compiler that contracts differently.
        let mut want = init.clone();
        for phase in &phases {
            reference_steps(&mut want, nx, ny, phase.alpha, 2 * phase.replays);
        }
        report.checks.push(Check::at_most(
            format!("final field vs CPU reference ({} steps)", args.steps),
            "max |error|",
            max_abs_diff(&result, &want),
            1e-3,
        ));
        format!("every step, {} CPU threads", cpu_threads())
    } else {
        args.reference
            .partial_note("last step", updates, "cell updates")
    };
    report.timings.add("reference", start.elapsed(), note);
    report.checks.push(Check::no_races(ctx));

    if let Some(path) = &args.trace {
        // After every check: the profiled step advances the field, which nothing reads now.
        let start = Instant::now();
        let profile = pipeline.profile(HeatStepParams {
            nx,
            ny,
            alpha: last_alpha,
            stride,
            mx,
            my,
            field: &mut field,
            next: &mut next,
            preview: &mut preview,
            snapshot: &mut snapshot,
        })?;
        report.write_trace(path, &profile)?;
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }

    if !args.no_png {
        let start = Instant::now();
        let png = encode_png(nx, ny, &result)?;
        report.write_output(&args.png, &png)?;
        report
            .timings
            .add("png", start.elapsed(), args.png.display().to_string());
    }
    Ok(Heat2dOutcome {
        report,
        field: result,
        phase_heat,
        full_reference,
        achieved_bandwidth: achieved_bw,
        copy_bandwidth: copy_bw,
    })
}

/// Encodes `field` as a PNG heat map (black, red, yellow, white from coldest to hottest),
/// the first row at the top. In memory, so that writing the file is one checked write.
pub fn encode_png(nx: u32, ny: u32, field: &[f32]) -> Result<Vec<u8>, BoxError> {
    use image::ImageEncoder;
    let (lo, hi) = field
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &t| {
            (lo.min(t), hi.max(t))
        });
    let span = (hi - lo).max(f32::MIN_POSITIVE);
    let mut pixels = Vec::with_capacity(field.len() * 3);
    for &t in field {
        pixels.extend_from_slice(&heat_color((t - lo) / span));
    }
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new_with_quality(
        &mut png,
        image::codecs::png::CompressionType::Fast,
        image::codecs::png::FilterType::Adaptive,
    )
    .write_image(&pixels, nx, ny, image::ExtendedColorType::Rgb8)
    .map_err(|e| format!("cannot encode the PNG: {e}"))?;
    Ok(png)
}

/// A black-red-yellow-white color map for `v` in `[0, 1]`.
pub fn heat_color(v: f32) -> [u8; 3] {
    let v = v.clamp(0.0, 1.0) * 3.0;
    let channel = |x: f32| (x.clamp(0.0, 1.0) * 255.0).round() as u8;
    [channel(v), channel(v - 1.0), channel(v - 2.0)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pipeline's ping-pong through the kernel's CPU implementation equals the
    /// reference bit for bit, and the walls keep the heat in.
    #[test]
    fn ping_pong_of_the_cpu_kernel_matches_the_reference() {
        let (nx, ny) = (37, 23);
        let init = initial_field(nx, ny);
        let (mut field, mut next) = (init.clone(), init.clone());
        for _ in 0..50 {
            cpu::heat_step(nx, ny, 0.2, &field, &mut next);
            cpu::heat_step(nx, ny, 0.2, &next, &mut field);
        }
        let mut want = init.clone();
        reference_steps(&mut want, nx, ny, 0.2, 100);
        assert_eq!(field, want);
        let drift = (total_heat(&field) - total_heat(&init)).abs() / total_heat(&init);
        assert!(drift < 1e-5, "{drift}");
    }

    #[test]
    fn the_preview_takes_every_strideth_cell_of_every_strideth_row() {
        let src: Vec<f32> = (0..5 * 4).map(|i| i as f32).collect();
        assert_eq!(cpu::preview_size(5, 4, 2), (3, 2));
        let mut dst = vec![0.0; 6];
        cpu::sample(5, 4, 2, 3, 2, &src, &mut dst);
        assert_eq!(dst, [0.0, 2.0, 4.0, 10.0, 12.0, 14.0]);
        let mut whole = vec![0.0; 20];
        cpu::sample(5, 4, 1, 5, 4, &src, &mut whole);
        assert_eq!(whole, src);
        // A smaller preview crops; a larger one leaves its extra cells alone.
        let mut cropped = vec![-1.0; 4];
        cpu::sample(5, 4, 2, 2, 2, &src, &mut cropped);
        assert_eq!(cropped, [0.0, 2.0, 10.0, 12.0]);
        let mut wide = vec![-1.0; 8];
        cpu::sample(5, 4, 2, 4, 2, &src, &mut wide);
        assert_eq!(wide, [0.0, 2.0, 4.0, -1.0, 10.0, 12.0, 14.0, -1.0]);
    }

    #[test]
    fn the_color_map_runs_from_black_to_white() {
        assert_eq!(heat_color(0.0), [0, 0, 0]);
        assert_eq!(heat_color(1.0), [255, 255, 255]);
        assert_eq!(heat_color(0.5), [255, 128, 0]);
    }
}
