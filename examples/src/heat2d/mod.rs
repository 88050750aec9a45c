//! `heat2d`: explicit 2-D heat diffusion, the main example.
//!
//! One replay of the captured graph advances two time steps, ping-ponging between two fields:
//!
//! ```text
//! compute (high priority):  forward: field -> next ──────▶ back: next -> field
//!                                         │
//! copy:                                   └─ save: next -> snapshot (pinned)
//! ```
//!
//! `save` reads `next` after `forward` wrote it (one event), and runs concurrently with `back`,
//! which also only reads `next` (the macro verifies the `concurrent(save, back)` claim). The
//! origin stream `compute` joins `copy` at the end of the step, so the next replay's `forward`
//! cannot overwrite `next` while `save` still reads it. The time step grows in phases (the
//! field smooths, so a larger `alpha = kappa dt / h^2` stays accurate); each phase sets
//! `alpha` in the instantiated graph in place with the generated `set_alpha`.

pub mod host;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

use crate::common::{BoxError, Check, Report, max_abs_diff, progress};

gpu_pipeline! {
    /// Two explicit Euler steps of 2-D heat diffusion (`field -> next -> field`), with the
    /// intermediate field copied back to pinned memory while the second step runs.
    pub pipeline HeatStep {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels heat = ptx(include_str!("../../kernels/heat2d.ptx")) {
            fn heat_step(nx: u32, ny: u32, alpha: f32, src: &[f32], dst: &mut [f32])
                host = crate::heat2d::host::heat_step;
        }
        params {
            nx: u32,
            ny: u32,
            alpha: f32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            snapshot: &mut PinnedBuffer<f32>,
        }
        stage forward on compute {
            launch heat::heat_step(nx, ny, alpha, field, next)
                grid (nx.div_ceil(16), ny.div_ceil(16)) block (16u32, 16u32);
        }
        stage save on copy {
            copy next -> snapshot;
        }
        stage back on compute {
            launch heat::heat_step(nx, ny, alpha, next, field)
                grid (nx.div_ceil(16), ny.div_ceil(16)) block (16u32, 16u32);
        }
        concurrent(save, back);
    }
}

/// Flags of the `heat2d` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "heat2d",
    about = "Explicit 2-D heat diffusion: one time step as a two-stream gpu-pipeline, captured \
             once as a graph and replayed, checked against a CPU reference.",
    after_help = "Backend: CUDA device 0 when available, else the host backend; \
                  GPU_PIPELINE_BACKEND=cuda|host|host-checked forces one."
)]
pub struct Heat2dArgs {
    /// Grid width in cells.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(2..=16384))]
    pub nx: u32,
    /// Grid height in cells.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(2..=16384))]
    pub ny: u32,
    /// Time steps (even: one graph replay advances two).
    #[arg(long, default_value_t = 2000, value_parser = parse_even_steps)]
    pub steps: u32,
    /// Phases of the run; the time step doubles from one phase to the next.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub phases: u32,
    /// `alpha = kappa dt / h^2` of the last phase (stable up to 0.25).
    #[arg(long, default_value_t = 0.2, value_parser = parse_alpha)]
    pub alpha: f32,
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
    /// trace (open it in ui.perfetto.dev to see the two streams overlap).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Turn the pipeline's fault tracking off: two fewer stream memory operations per step;
    /// an asynchronous fault then names the pipeline but not the stage.
    #[arg(long)]
    pub no_fault_tracking: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_even_steps(s: &str) -> Result<u32, String> {
    let steps: u32 = s
        .parse()
        .map_err(|e| format!("`{s}` is not a step count: {e}"))?;
    if steps == 0 || !steps.is_multiple_of(2) {
        return Err(format!(
            "{steps} is not a positive even number (one replay advances two steps)"
        ));
    }
    Ok(steps)
}

fn parse_alpha(s: &str) -> Result<f32, String> {
    let alpha: f32 = s
        .parse()
        .map_err(|e| format!("`{s}` is not a number: {e}"))?;
    if !(alpha > 0.0 && alpha <= 0.25) {
        return Err(format!(
            "{alpha} is outside (0, 0.25]; the explicit scheme is unstable above 0.25"
        ));
    }
    Ok(alpha)
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
    let replays = args.steps / 2;
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
    let mut field = vec![0.0f32; (nx * ny) as usize];
    for y in 0..ny {
        for x in 0..nx {
            let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
            let in_disc = |cx: f32, cy: f32| (px - cx).powi(2) + (py - cy).powi(2) <= r * r;
            let mut t = 0.0;
            if in_disc(0.3 * fx, 0.35 * fy) {
                t = 100.0;
            } else if in_disc(0.7 * fx, 0.65 * fy) {
                t = 60.0;
            } else if (py - 0.85 * fy).abs() < 0.04 * fy {
                t = 25.0;
            }
            field[(y * nx + x) as usize] = t;
        }
    }
    field
}

/// The total heat (sum of cell temperatures), in f64 so that the sum itself adds no drift.
pub fn total_heat(field: &[f32]) -> f64 {
    field.iter().map(|&t| f64::from(t)).sum()
}

/// The CPU reference: `steps` explicit steps of `field` in place. A plain loop, written
/// apart from the kernel's host implementation.
pub fn reference_steps(field: &mut Vec<f32>, nx: u32, ny: u32, alpha: f32, steps: u32) {
    let (nx, ny) = (nx as usize, ny as usize);
    let mut next = vec![0.0f32; field.len()];
    for _ in 0..steps {
        for y in 0..ny {
            for x in 0..nx {
                next[y * nx + x] = host::cell(field, nx, ny, x, y, alpha);
            }
        }
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
    /// The total heat at the end of each phase, read from the pinned snapshot.
    pub phase_heat: Vec<f64>,
}

/// Runs the example: `args.steps` steps on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &Heat2dArgs) -> Result<Heat2dOutcome, BoxError> {
    let mut report = Report::new(ctx);
    let (nx, ny) = (args.nx, args.ny);
    let cells = (nx * ny) as usize;
    let phases = schedule(args);
    let init = initial_field(nx, ny);
    let heat0 = total_heat(&init);

    // Setup: both fields uploaded (blocking), a pinned snapshot, the pipeline's streams and
    // kernels.
    let start = Instant::now();
    let setup = Stream::non_blocking(ctx)?;
    let mut field = DeviceBuffer::from_slice(&setup, &init)?;
    let mut next = DeviceBuffer::from_slice(&setup, &init)?;
    let mut snapshot = PinnedBuffer::<f32>::zeros(ctx, cells)?;
    let mut pipeline = HeatStep::new(ctx)?;
    pipeline.set_fault_tracking(!args.no_fault_tracking);
    report
        .timings
        .add("setup", start.elapsed(), "alloc, upload, load kernels");

    let start = Instant::now();
    let mut graph = pipeline.capture(HeatStepParams {
        nx,
        ny,
        alpha: phases[0].alpha,
        field: &mut field,
        next: &mut next,
        snapshot: &mut snapshot,
    })?;
    let note = match graph.node_count() {
        Ok(n) => format!("{n} graph nodes"),
        Err(_) => String::new(),
    };
    report.timings.add("capture", start.elapsed(), note);

    // The replays, phase by phase. The host waits only at the end of a phase and at every
    // ~1% for the progress bar; between those the launches queue up on the device.
    let bar = progress(u64::from(args.steps), args.quiet, "steps");
    let mut phase_heat = Vec::with_capacity(phases.len());
    let start = Instant::now();
    for phase in &phases {
        graph.set_alpha(phase.alpha)?;
        let tick = (args.steps / 200).max(1);
        for r in 0..phase.replays {
            graph.launch()?;
            if (r + 1) % tick == 0 {
                graph.synchronize()?;
                bar.inc(2 * u64::from(tick));
            }
        }
        graph.synchronize()?;
        // The snapshot holds the field one step before the end of the phase.
        phase_heat.push(total_heat(&graph.params().snapshot.as_slice()?));
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    let updates = f64::from(args.steps) * cells as f64;
    report.timings.add(
        "replays",
        elapsed,
        format!(
            "{} steps, {:.1} Mcell-steps/s",
            args.steps,
            updates / elapsed.as_secs_f64() / 1e6
        ),
    );
    drop(graph);

    let start = Instant::now();
    let result = field.to_vec(&setup)?;
    let snap = snapshot.to_vec()?;
    report.timings.add("readback", start.elapsed(), "");

    // The CPU reference, the same schedule; it keeps the state one step before the end,
    // which is what the last snapshot holds.
    let start = Instant::now();
    let mut want = init.clone();
    let last = phases.len() - 1;
    for (k, phase) in phases.iter().enumerate() {
        let steps = 2 * phase.replays;
        if k == last {
            reference_steps(&mut want, nx, ny, phase.alpha, steps - 1);
        } else {
            reference_steps(&mut want, nx, ny, phase.alpha, steps);
        }
    }
    let want_snapshot = want.clone();
    reference_steps(&mut want, nx, ny, phases[last].alpha, 1);
    report
        .timings
        .add("reference", start.elapsed(), "CPU, one thread");

    // Temperatures stay within [0, 100]; f32 rounding differs at most by a few ulps per step
    // when a compiler contracts differently, far below this limit.
    let tol = 1e-3;
    report.checks.push(Check::at_most(
        "final field vs CPU reference",
        "max |error|",
        max_abs_diff(&result, &want),
        tol,
    ));
    report.checks.push(Check::at_most(
        "last snapshot vs CPU reference",
        "max |error|",
        max_abs_diff(&snap, &want_snapshot),
        tol,
    ));
    // Insulated walls: no heat leaves, so the total is conserved up to f32 rounding.
    let drift = phase_heat
        .iter()
        .chain(std::iter::once(&total_heat(&result)))
        .map(|h| (h - heat0).abs() / heat0)
        .fold(0.0, f64::max);
    report.checks.push(Check::at_most(
        "energy bookkeeping (total heat, every phase)",
        "max relative drift",
        drift,
        1e-4,
    ));
    report.checks.push(Check::no_races(ctx));

    if let Some(path) = &args.trace {
        // After every check: the profiled step advances the field, which nothing reads now.
        let start = Instant::now();
        let profile = pipeline.profile(HeatStepParams {
            nx,
            ny,
            alpha: phases[last].alpha,
            field: &mut field,
            next: &mut next,
            snapshot: &mut snapshot,
        })?;
        std::fs::write(path, profile.to_chrome_trace())?;
        println!(
            "one profiled step ({:.3} ms):\n{profile}",
            profile.total_ms()
        );
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }

    if !args.no_png {
        let start = Instant::now();
        write_png(&args.png, nx, ny, &result)?;
        report
            .timings
            .add("png", start.elapsed(), args.png.display().to_string());
    }
    Ok(Heat2dOutcome {
        report,
        field: result,
        phase_heat,
    })
}

/// Writes `field` as a heat map (black, red, yellow, white from coldest to hottest), the
/// first row at the top.
pub fn write_png(path: &Path, nx: u32, ny: u32, field: &[f32]) -> Result<(), BoxError> {
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
    image::save_buffer_with_format(
        path,
        &pixels,
        nx,
        ny,
        image::ExtendedColorType::Rgb8,
        image::ImageFormat::Png,
    )
    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
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

    /// The pipeline's ping-pong through the kernel's host implementation equals the
    /// reference bit for bit, and the walls keep the heat in.
    #[test]
    fn ping_pong_of_the_host_kernel_matches_the_reference() {
        let (nx, ny) = (37, 23);
        let init = initial_field(nx, ny);
        let (mut field, mut next) = (init.clone(), init.clone());
        for _ in 0..50 {
            host::heat_step(nx, ny, 0.2, &field, &mut next);
            host::heat_step(nx, ny, 0.2, &next, &mut field);
        }
        let mut want = init.clone();
        reference_steps(&mut want, nx, ny, 0.2, 100);
        assert_eq!(field, want);
        let drift = (total_heat(&field) - total_heat(&init)).abs() / total_heat(&init);
        assert!(drift < 1e-5, "{drift}");
    }

    #[test]
    fn the_color_map_runs_from_black_to_white() {
        assert_eq!(heat_color(0.0), [0, 0, 0]);
        assert_eq!(heat_color(1.0), [255, 255, 255]);
        assert_eq!(heat_color(0.5), [255, 128, 0]);
    }
}
