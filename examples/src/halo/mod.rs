//! `halo`: heat diffusion on one rank's band of a field, its halo rows streamed in from the
//! host every step and its edge rows streamed out, as a domain-decomposed code does between
//! MPI exchanges.
//!
//! The field has `ny` rows of its own plus a ghost row above and below (row 0 and row
//! `ny + 1`). Each replay of the captured step:
//!
//! ```text
//! compute (high priority): interior: rows 2..ny-1 of `next` from rows 1..=ny of `field`
//! halo:                    load: ghost rows <- top, bottom (pinned)
//!                          boundary: rows 1 and ny of `next` (they need the ghost rows)
//!                          send: rows 1 and ny of `next` -> edges (pinned)
//! ```
//!
//! Every launch and copy names a range of one field (`field[nx..(ny + 1) * nx]`, ...). The
//! interior touches no row that `load`, `boundary` or `send` writes, so it runs concurrently
//! with all of them (the `concurrent` claims are checked on the actual ranges before each
//! step); `boundary` waits for `load` on its own stream. Between replays the host writes the
//! next ghost rows (a boundary that varies with time) and reads the edges the last replay
//! sent, through the graph's window, and the fields are swapped in place (`swap_field_next`).
//! The check replays every step on the CPU when that is cheap enough (`--reference`), else the
//! last step against a CPU step of the field before it.

pub mod host;

use std::ops::Bound;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

use crate::common::{
    BoxError, Check, ReferenceMode, Report, check_output_path, cpu_threads, float_in, max_abs_diff,
    par_chunks, progress,
};

gpu_pipeline! {
    /// One explicit step of heat diffusion on a band of rows with a ghost row above and
    /// below: ghost rows in from pinned memory, interior and boundary rows computed by
    /// launches on ranges of one field, the new edge rows out to pinned memory.
    pub pipeline HaloStep {
        streams { compute(priority = high), halo(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../kernels/halo.ptx")) {
            fn stencil_rows(nx: u32, rows: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; nx * rows])
                cpu = crate::halo::host::stencil_rows;
        }
        params {
            nx: usize,
            ny: usize,
            alpha: f32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            top: &mut PinnedBuffer<f32>,
            bottom: &mut PinnedBuffer<f32>,
            edges: &mut PinnedBuffer<f32>,
        }
        swap(field, next);
        stage load on halo {
            copy top -> field[..nx];
            copy bottom -> field[(ny + 1) * nx..];
        }
        stage interior on compute {
            launch k::stencil_rows(nx as u32, (ny - 2) as u32, alpha, field[nx..(ny + 1) * nx], next[2 * nx..ny * nx])
                grid ((nx as u32).div_ceil(32), ((ny - 2) as u32).div_ceil(8)) block (32u32, 8u32);
        }
        stage boundary on halo {
            launch k::stencil_rows(nx as u32, 1, alpha, field[..3 * nx], next[nx..2 * nx])
                grid ((nx as u32).div_ceil(32), 1u32) block (32u32, 8u32);
            launch k::stencil_rows(nx as u32, 1, alpha, field[(ny - 1) * nx..], next[ny * nx..(ny + 1) * nx])
                grid ((nx as u32).div_ceil(32), 1u32) block (32u32, 8u32);
        }
        stage send on halo {
            copy next[nx..2 * nx] -> edges[..nx];
            copy next[ny * nx..(ny + 1) * nx] -> edges[nx..];
        }
        concurrent(load, interior);
        concurrent(boundary, interior);
        concurrent(send, interior);
    }
}

/// Flags of the `halo` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "halo",
    about = "Heat diffusion on a band of rows: interior and boundary rows computed concurrently \
             on ranges of one field, ghost rows streamed in from the host and edge rows out \
             every replay; checked against a CPU reference.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one.",
    allow_negative_numbers = true
)]
pub struct HaloArgs {
    /// Cells per row.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub nx: u32,
    /// Rows of the band (ghost rows not counted).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(3..=65536))]
    pub ny: u32,
    /// Time steps (one replay each).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub steps: u32,
    /// `alpha = kappa dt / h^2` (stable up to 0.25).
    #[arg(long, default_value_t = 0.2, value_parser = float_in((Bound::Excluded(0.0), Bound::Included(0.25))))]
    pub alpha: f32,
    /// How much of the run to replay on the CPU: `auto` replays all of it when that costs at
    /// most 4e9 cell updates, else only the last step.
    #[arg(long, value_enum, default_value_t = ReferenceMode::Auto)]
    pub reference: ReferenceMode,
    /// Print the plan of one step (every stage with its waits) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more step and write its per-stage timings as a Chrome trace
    /// (open it in ui.perfetto.dev to see the interior overlap the halo stages).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

impl HaloArgs {
    /// The rules clap cannot express: a writable trace file.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The plan of one step `--dot` prints, drawn on the CPU backend (its shape does not
    /// depend on the size, so it is drawn for a small field).
    pub fn dot(&self) -> Option<String> {
        if !self.dot {
            return None;
        }
        let drawn = || -> Result<String, BoxError> {
            let ctx = Context::cpu();
            let (nx, ny) = (self.nx.min(8) as usize, self.ny.min(8) as usize);
            let stream = Stream::non_blocking(&ctx)?;
            let mut field = DeviceBuffer::<f32>::zeros(&stream, nx * (ny + 2))?;
            let mut next = DeviceBuffer::<f32>::zeros(&stream, nx * (ny + 2))?;
            let mut top = PinnedBuffer::<f32>::zeros(&ctx, nx)?;
            let mut bottom = PinnedBuffer::<f32>::zeros(&ctx, nx)?;
            let mut edges = PinnedBuffer::<f32>::zeros(&ctx, 2 * nx)?;
            stream.synchronize()?;
            let mut pipeline = HaloStep::new(&ctx)?;
            Ok(pipeline.plan_dot(&HaloStepParams {
                nx,
                ny,
                alpha: self.alpha,
                field: &mut field,
                next: &mut next,
                top: &mut top,
                bottom: &mut bottom,
                edges: &mut edges,
            })?)
        };
        Some(
            drawn().unwrap_or_else(|e| {
                format!("// the plan could not be drawn: {e}\n{}", HaloStep::DOT)
            }),
        )
    }
}

/// The initial band (ghost rows included, at 0): a warm disc in the middle.
pub fn initial_field(nx: u32, ny: u32) -> Vec<f32> {
    let (nx, ny) = (nx as usize, ny as usize);
    let mut field = vec![0.0f32; nx * (ny + 2)];
    let (cx, cy, r) = (nx as f32 / 2.0, ny as f32 / 2.0, 0.2 * nx.min(ny) as f32);
    for y in 1..=ny {
        for x in 0..nx {
            let (dx, dy) = (x as f32 + 0.5 - cx, (y - 1) as f32 + 0.5 - cy);
            if dx * dx + dy * dy <= r * r {
                field[y * nx + x] = 50.0;
            }
        }
    }
    field
}

/// The ghost rows of step `k`, as the neighbouring ranks would send them: a warm wave
/// travelling along the top edge, the bottom at a constant 10.
pub fn ghost_rows(nx: u32, k: u32) -> (Vec<f32>, Vec<f32>) {
    let top = (0..nx)
        .map(|x| {
            let phase = (x as f32 / nx as f32 + k as f32 / 64.0) * std::f32::consts::TAU;
            40.0 + 20.0 * phase.sin()
        })
        .collect();
    (top, vec![10.0; nx as usize])
}

/// One CPU step of the band (rows `1..=ny` of `dst` from `src`, whose ghost rows are set),
/// rows spread over all cores.
pub fn reference_step(src: &[f32], dst: &mut [f32], nx: u32, ny: u32, alpha: f32) {
    let (nx, ny) = (nx as usize, ny as usize);
    let band = &mut dst[nx..(ny + 1) * nx];
    par_chunks(band, nx, |first, rows| {
        for (k, row) in rows.chunks_mut(nx).enumerate() {
            let y = 1 + first / nx + k;
            for (x, out) in row.iter_mut().enumerate() {
                *out = host::cell(src, nx, y, x, alpha);
            }
        }
    });
}

/// What a run produced besides its report.
#[derive(Clone, Debug)]
pub struct HaloOutcome {
    /// Backend, checks and timings.
    pub report: Report,
    /// The final band, rows `1..=ny`.
    pub band: Vec<f32>,
    /// The edges the last step sent: row 1, then row `ny`.
    pub edges: Vec<f32>,
    /// Whether the whole run was replayed on the CPU and compared.
    pub full_reference: bool,
}

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &HaloArgs) -> Result<HaloOutcome, BoxError> {
    args.validate()?;
    let mut report = Report::new(ctx);
    let (nx, ny) = (args.nx, args.ny);
    let (w, h) = (nx as usize, ny as usize);
    let init = initial_field(nx, ny);

    let start = Instant::now();
    let setup = Stream::non_blocking(ctx)?;
    let mut field = DeviceBuffer::from_slice(&setup, &init)?;
    let mut next = DeviceBuffer::from_slice(&setup, &init)?;
    let mut top = PinnedBuffer::<f32>::zeros(ctx, w)?;
    let mut bottom = PinnedBuffer::<f32>::zeros(ctx, w)?;
    let mut edges = PinnedBuffer::<f32>::zeros(ctx, 2 * w)?;
    setup.synchronize()?;
    let mut pipeline = HaloStep::new(ctx)?;
    report
        .timings
        .add("setup", start.elapsed(), "alloc, upload, load kernels");

    let start = Instant::now();
    let mut graph = pipeline.capture(HaloStepParams {
        nx: w,
        ny: h,
        alpha: args.alpha,
        field: &mut field,
        next: &mut next,
        top: &mut top,
        bottom: &mut bottom,
        edges: &mut edges,
    })?;
    report.timings.add("capture", start.elapsed(), "");

    // Each step: the window (after the replays so far) takes the next ghost rows, the replay
    // computes the step, and the fields swap for the next.
    let bar = progress(u64::from(args.steps), args.quiet, "steps");
    let mut sent_before_last = Vec::new();
    let start = Instant::now();
    for k in 0..args.steps {
        let (t, b) = ghost_rows(nx, k);
        let mut window = graph.window()?;
        if k + 1 == args.steps {
            sent_before_last = window.edges()?.to_vec();
        }
        window.top_mut()?.copy_from_slice(&t);
        window.bottom_mut()?.copy_from_slice(&b);
        window.launch()?;
        graph.swap_field_next()?;
        bar.inc(1);
    }
    let sent = graph.window()?.edges()?.to_vec();
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    let cells = f64::from(args.steps) * (w * h) as f64;
    report.timings.add(
        "steps",
        elapsed,
        format!(
            "{} steps, {:.1} Mcell-steps/s, each with its ghost rows in and edges out",
            args.steps,
            cells / elapsed.as_secs_f64() / 1e6
        ),
    );
    // After the last swap `field` holds the latest band and `next` the one before it (whose
    // ghost rows are the last step's).
    let latest = graph.params().field.to_vec(&setup)?;
    let before = graph.params().next.to_vec(&setup)?;
    drop(graph);
    let band = latest[w..(h + 1) * w].to_vec();

    let start = Instant::now();
    let mut want_last = before.clone();
    reference_step(&before, &mut want_last, nx, ny, args.alpha);
    report.checks.push(Check::at_most(
        "last step vs a CPU step of the band before it (every cell)",
        "max |error|",
        max_abs_diff(&band, &want_last[w..(h + 1) * w]),
        0.0,
    ));
    let mut want_edges = want_last[w..2 * w].to_vec();
    want_edges.extend_from_slice(&want_last[h * w..(h + 1) * w]);
    report.checks.push(Check::at_most(
        "edges the last step sent vs its rows 1 and ny",
        "max |error|",
        max_abs_diff(&sent, &want_edges),
        0.0,
    ));
    let full_reference = args.reference.full(cells);
    let note = if full_reference {
        let (mut a, mut b) = (init.clone(), init.clone());
        let mut edges_before_last = Vec::new();
        for k in 0..args.steps {
            let (t, bottom_row) = ghost_rows(nx, k);
            a[..w].copy_from_slice(&t);
            a[(h + 1) * w..].copy_from_slice(&bottom_row);
            if k + 1 == args.steps {
                edges_before_last = [&a[w..2 * w], &a[h * w..(h + 1) * w]].concat();
            }
            reference_step(&a, &mut b, nx, ny, args.alpha);
            std::mem::swap(&mut a, &mut b);
        }
        report.checks.push(Check::at_most(
            format!("final band vs CPU reference ({} steps)", args.steps),
            "max |error|",
            max_abs_diff(&band, &a[w..(h + 1) * w]),
            0.0,
        ));
        if args.steps > 1 {
            report.checks.push(Check::at_most(
                "edges read between the last two steps vs the CPU's",
                "max |error|",
                max_abs_diff(&sent_before_last, &edges_before_last),
                0.0,
            ));
        }
        format!("every step, {} CPU threads", cpu_threads())
    } else {
        args.reference
            .partial_note("last step", cells, "cell updates")
    };
    report.timings.add("reference", start.elapsed(), note);
    report.checks.push(Check::no_races(ctx));

    if let Some(path) = &args.trace {
        let start = Instant::now();
        let profile = pipeline.profile(HaloStepParams {
            nx: w,
            ny: h,
            alpha: args.alpha,
            field: &mut field,
            next: &mut next,
            top: &mut top,
            bottom: &mut bottom,
            edges: &mut edges,
        })?;
        report.write_trace(path, &profile)?;
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }
    Ok(HaloOutcome {
        report,
        band,
        edges: sent,
        full_reference,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_bands_make_the_reference_step() {
        let (nx, ny) = (9u32, 7u32);
        let (w, h) = (9usize, 7usize);
        let mut src = initial_field(nx, ny);
        let (t, b) = ghost_rows(nx, 3);
        src[..w].copy_from_slice(&t);
        src[(h + 1) * w..].copy_from_slice(&b);
        let mut want = src.clone();
        reference_step(&src, &mut want, nx, ny, 0.2);
        // The example's three launches: interior, top row, bottom row.
        let mut got = src.clone();
        host::stencil_rows(
            nx,
            ny - 2,
            0.2,
            &src[w..(h + 1) * w],
            &mut got[2 * w..h * w],
        );
        host::stencil_rows(nx, 1, 0.2, &src[..3 * w], &mut got[w..2 * w]);
        host::stencil_rows(
            nx,
            1,
            0.2,
            &src[(h - 1) * w..],
            &mut got[h * w..(h + 1) * w],
        );
        assert_eq!(got[w..(h + 1) * w], want[w..(h + 1) * w]);
    }
}
