//! `jacobi`: the 2-D Laplace equation solved by Jacobi iteration to a residual tolerance.
//!
//! One sweep is captured once as a graph; each replay computes `u_new` from `u` and the
//! residual (the largest change of any cell), which the copy stream brings back to pinned
//! memory. Between replays the grids are exchanged with the generated `swap_u_u_new` (the
//! graph keeps one instantiation per arrangement, so a swap costs nothing), and the host
//! reads the residual through the graph's window, so the solver stops as soon as it is below
//! `--tol`:
//!
//! ```text
//! compute (high priority):  sweep: u -> u_new, block maxima -> residual
//!                                                     │ RAW residual
//! copy:                                               └─ report: residual -> residual_host
//! host, between replays:    swap_u_u_new(); window: residual_host[0] < tol ?
//! ```
//!
//! The boundary holds fixed values (a hot lid at 1, the other walls at 0), so the solution
//! converges to the harmonic function with those values. The checks: the whole run replayed
//! on the CPU when that is cheap enough (`--reference`), bit for bit, residuals included;
//! otherwise the last sweep against a CPU sweep of the grid before it, which the swap leaves
//! in `u_new`.
//!
//! With `--device-loop` the whole solve is one launch of [`JacobiConverge`]: a device `while`
//! loop (a conditional WHILE node on CUDA) runs two sweeps `u -> u_new -> u` and reduces the
//! second one's residual per iteration, until the residual is at most `--tol`; the host waits
//! once instead of once per check:
//!
//! ```text
//! compute:  fill residual = MAX
//!           while residual > tol (at most ceil(max_iters / 2) times):
//!               sweep u -> u_new; sweep u_new -> u, block maxima; reduce -> residual
//! ```
//!
//! The same checks follow (after the loop `u` holds the latest grid, `u_new` the one before).

pub mod anchor;
pub mod host;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, Error, GraphExec, PinnedBuffer, Stream, gpu_pipeline};

use crate::common::{
    BoxError, Check, POSITIVE, ReferenceMode, Report, check_output_path, cpu_threads, float_in,
    max_abs_diff, par_chunks, progress,
};

gpu_pipeline! {
    /// One Jacobi sweep `u -> u_new` of the 2-D Laplace equation and its residual, copied
    /// back to pinned memory; `swap(u, u_new)` exchanges the grids between replays.
    pub pipeline JacobiStep {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../kernels/jacobi.ptx")) {
            fn jacobi_sweep(nx: u32, ny: u32, src: &[f32; nx * ny], dst: &mut [f32; nx * ny], block_max: &mut [f32; unbounded])
                cpu = crate::jacobi::host::jacobi_sweep;
            fn reduce_max(n: u32, partial: &[f32; n], out: &mut [f32; 1])
                cpu = crate::jacobi::host::reduce_max;
        }
        params {
            nx: u32,
            ny: u32,
            u: &mut DeviceBuffer<f32>,
            u_new: &mut DeviceBuffer<f32>,
            block_max: &mut DeviceBuffer<f32>,
            residual: &mut DeviceBuffer<f32>,
            residual_host: &mut PinnedBuffer<f32>,
        }
        swap(u, u_new);
        stage sweep on compute {
            launch k::jacobi_sweep(nx, ny, u, u_new, block_max)
                grid (nx.div_ceil(32), ny.div_ceil(8)) block (32u32, 8u32);
            launch k::reduce_max(block_max.len() as u32, block_max, residual)
                grid 1u32 block 256u32;
        }
        stage report on copy { copy residual -> residual_host; }
    }
}

gpu_pipeline! {
    /// The whole solve in one launch: a device `while` loop that sweeps `u -> u_new -> u` and
    /// reduces the second sweep's block maxima to `residual`, while the residual is above
    /// `tol`, at most `max_pairs` times (then the synchronize reports
    /// `Error::IterationLimit`). The same work per iteration as the raw C++ anchor
    /// `benches/anchors/jacobi_while.cu`.
    pub pipeline JacobiConverge {
        streams { compute(priority = high) }
        unsafe kernels k = ptx(include_str!("../../kernels/jacobi.ptx")) {
            fn jacobi_sweep(nx: u32, ny: u32, src: &[f32; nx * ny], dst: &mut [f32; nx * ny], block_max: &mut [f32; unbounded])
                cpu = crate::jacobi::host::jacobi_sweep;
            fn reduce_max(n: u32, partial: &[f32; n], out: &mut [f32; 1])
                cpu = crate::jacobi::host::reduce_max;
        }
        params {
            nx: u32,
            ny: u32,
            tol: f32,
            max_pairs: u32,
            u: &mut DeviceBuffer<f32>,
            u_new: &mut DeviceBuffer<f32>,
            block_max: &mut DeviceBuffer<f32>,
            residual: &mut DeviceBuffer<f32>,
        }
        stage solve on compute {
            fill residual = f32::MAX;
            while residual > tol max max_pairs {
                launch k::jacobi_sweep(nx, ny, u, u_new, block_max)
                    grid (nx.div_ceil(32), ny.div_ceil(8)) block (32u32, 8u32);
                launch k::jacobi_sweep(nx, ny, u_new, u, block_max)
                    grid (nx.div_ceil(32), ny.div_ceil(8)) block (32u32, 8u32);
                launch k::reduce_max(block_max.len() as u32, block_max, residual)
                    grid 1u32 block 256u32;
            }
        }
    }
}

gpu_pipeline! {
    /// One step of the host loop to tolerance: two sweeps `u -> u_new -> u`, the second one's
    /// residual reduced and copied back to pinned memory, all on one stream. The same graph as
    /// the raw C++ host loop of `benches/anchors/jacobi_while.cu` (one graph per sweep pair,
    /// the residual tested on the host after every launch), so the two compare like for like.
    pub pipeline JacobiPair {
        streams { compute(priority = high) }
        unsafe kernels k = ptx(include_str!("../../kernels/jacobi.ptx")) {
            fn jacobi_sweep(nx: u32, ny: u32, src: &[f32; nx * ny], dst: &mut [f32; nx * ny], block_max: &mut [f32; unbounded])
                cpu = crate::jacobi::host::jacobi_sweep;
            fn reduce_max(n: u32, partial: &[f32; n], out: &mut [f32; 1])
                cpu = crate::jacobi::host::reduce_max;
        }
        params {
            nx: u32,
            ny: u32,
            u: &mut DeviceBuffer<f32>,
            u_new: &mut DeviceBuffer<f32>,
            block_max: &mut DeviceBuffer<f32>,
            residual: &mut DeviceBuffer<f32>,
            residual_host: &mut PinnedBuffer<f32>,
        }
        stage pair on compute {
            launch k::jacobi_sweep(nx, ny, u, u_new, block_max)
                grid (nx.div_ceil(32), ny.div_ceil(8)) block (32u32, 8u32);
            launch k::jacobi_sweep(nx, ny, u_new, u, block_max)
                grid (nx.div_ceil(32), ny.div_ceil(8)) block (32u32, 8u32);
            launch k::reduce_max(block_max.len() as u32, block_max, residual)
                grid 1u32 block 256u32;
            copy residual -> residual_host;
        }
    }
}

/// Flags of the `jacobi` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "jacobi",
    about = "The 2-D Laplace equation by Jacobi iteration to a residual tolerance: one sweep \
             captured as a graph, replayed with the grids swapped in place and the residual \
             read between replays; checked against a CPU reference.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one.",
    allow_negative_numbers = true
)]
pub struct JacobiArgs {
    /// Grid width in cells.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(3..=16384))]
    pub nx: u32,
    /// Grid height in cells.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(3..=16384))]
    pub ny: u32,
    /// Stop when the largest change of a cell in one sweep is below this.
    #[arg(long, default_value_t = 1e-4, value_parser = float_in(POSITIVE))]
    pub tol: f32,
    /// Stop after this many sweeps even if the tolerance is not reached (with
    /// `--device-loop`, rounded up to an even number: the device loop sweeps in pairs).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iters: u32,
    /// Read the residual every this-many sweeps (1: after every sweep). Not with
    /// `--device-loop`, which tests it on the device after every pair of sweeps.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub check_every: u32,
    /// Converge inside one graph launch (`JacobiConverge`): a device `while` loop runs the
    /// sweeps in pairs (`u -> u_new -> u`) and tests the second one's residual on the device,
    /// with no host round trip per sweep; the run then takes an even number of sweeps.
    #[arg(long)]
    pub device_loop: bool,
    /// How much of the run to replay on the CPU: `auto` replays all of it when that costs at
    /// most 4e9 cell updates, else only the last sweep.
    #[arg(long, value_enum, default_value_t = ReferenceMode::Auto)]
    pub reference: ReferenceMode,
    /// Print the stage graph of one sweep (`JacobiStep::DOT`; with `--device-loop`, the
    /// loop's, `JacobiConverge::DOT`) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more sweep (of `JacobiStep`, also with `--device-loop`)
    /// and write its per-stage timings as a Chrome trace (open it in ui.perfetto.dev).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

impl JacobiArgs {
    /// The rules clap cannot express: a writable trace file; no `--check-every` with
    /// `--device-loop`, nor one above `--max-iters`.
    pub fn validate(&self) -> Result<(), String> {
        if self.device_loop && self.check_every != 1 {
            return Err(format!(
                "`--check-every {}` does not apply with `--device-loop`: the device tests the \
                 residual after every pair of sweeps, and the host reads it once at the end",
                self.check_every
            ));
        }
        if self.check_every > self.max_iters {
            return Err(format!(
                "`--check-every {}` exceeds `--max-iters {}`: the residual would be read only \
                 at the last sweep; check at most every {} sweeps",
                self.check_every, self.max_iters, self.max_iters
            ));
        }
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The stage graph `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        let dot = if self.device_loop {
            JacobiConverge::DOT
        } else {
            JacobiStep::DOT
        };
        self.dot.then(|| dot.to_owned())
    }
}

/// The initial grid: a hot lid (the first row at 1), everything else 0. The boundary keeps
/// its values.
pub fn initial_grid(nx: u32, ny: u32) -> Vec<f32> {
    let mut grid = vec![0.0f32; nx as usize * ny as usize];
    grid[..nx as usize].fill(1.0);
    grid
}

/// One CPU sweep `src -> dst`, rows spread over all cores; returns the residual. Written
/// apart from the kernel's CPU implementation, sharing only the arithmetic of one cell.
pub fn reference_sweep(src: &[f32], dst: &mut [f32], nx: u32, ny: u32) -> f32 {
    let (nx, ny) = (nx as usize, ny as usize);
    par_chunks(dst, nx, |first, rows| {
        for (k, row) in rows.chunks_mut(nx).enumerate() {
            let y = first / nx + k;
            for (x, out) in row.iter_mut().enumerate() {
                *out = host::cell(src, nx, ny, x, y);
            }
        }
    });
    src.iter()
        .zip(dst.iter())
        .fold(0.0f32, |m, (a, b)| m.max((b - a).abs()))
}

/// What a run produced besides its report.
#[derive(Clone, Debug)]
pub struct JacobiOutcome {
    /// Backend, checks and timings.
    pub report: Report,
    /// Sweeps run.
    pub iterations: u32,
    /// The last residual read.
    pub residual: f32,
    /// The final grid.
    pub grid: Vec<f32>,
    /// Whether the whole run was replayed on the CPU and compared.
    pub full_reference: bool,
    /// Seconds per sweep (replays only).
    pub seconds_per_iteration: f64,
}

/// The solver's device memory (and the pinned residual the host loop reads), both grids
/// holding the initial grid when made.
struct Grids {
    u: DeviceBuffer<f32>,
    u_new: DeviceBuffer<f32>,
    block_max: DeviceBuffer<f32>,
    residual: DeviceBuffer<f32>,
    residual_host: PinnedBuffer<f32>,
}

impl Grids {
    /// Allocates and uploads, waiting for the uploads.
    fn new(
        ctx: &Context,
        setup: &Stream,
        init: &[f32],
        nx: u32,
        ny: u32,
    ) -> Result<Grids, BoxError> {
        let grids = Grids {
            u: DeviceBuffer::from_slice(setup, init)?,
            u_new: DeviceBuffer::from_slice(setup, init)?,
            block_max: DeviceBuffer::zeros(setup, host::blocks(nx, ny))?,
            residual: DeviceBuffer::zeros(setup, 1)?,
            residual_host: PinnedBuffer::zeros(ctx, 1)?,
        };
        setup.synchronize()?;
        Ok(grids)
    }

    /// Both grids back to `init` (a device copy of the initial grid), waited for.
    fn reset(&mut self, setup: &Stream, init: &DeviceBuffer<f32>) -> Result<(), BoxError> {
        setup.copy_dtod(init, &mut self.u)?;
        setup.copy_dtod(init, &mut self.u_new)?;
        setup.synchronize()?;
        Ok(())
    }

    /// The params of one host-loop sweep.
    fn step(&mut self, nx: u32, ny: u32) -> JacobiStepParams<'_> {
        JacobiStepParams {
            nx,
            ny,
            u: &mut self.u,
            u_new: &mut self.u_new,
            block_max: &mut self.block_max,
            residual: &mut self.residual,
            residual_host: &mut self.residual_host,
        }
    }

    /// The params of one host-loop pair of sweeps.
    fn pair(&mut self, nx: u32, ny: u32) -> JacobiPairParams<'_> {
        JacobiPairParams {
            nx,
            ny,
            u: &mut self.u,
            u_new: &mut self.u_new,
            block_max: &mut self.block_max,
            residual: &mut self.residual,
            residual_host: &mut self.residual_host,
        }
    }

    /// The params of the device loop.
    fn converge(&mut self, nx: u32, ny: u32, tol: f32, max_pairs: u32) -> JacobiConvergeParams<'_> {
        JacobiConvergeParams {
            nx,
            ny,
            tol,
            max_pairs,
            u: &mut self.u,
            u_new: &mut self.u_new,
            block_max: &mut self.block_max,
            residual: &mut self.residual,
        }
    }
}

/// What the synchronize after a [`JacobiConverge`] launch says: `Ok(true)` when the loop
/// ended on the tolerance, `Ok(false)` when it stopped at `max_pairs` with the residual still
/// above it (`Error::IterationLimit` in `Error::Step`: the grids are valid, only not
/// converged), any other error as it is.
fn reached(result: gpu_pipeline::Result<()>) -> Result<bool, BoxError> {
    match result {
        Ok(()) => Ok(true),
        Err(Error::Step {
            pipeline: "JacobiConverge",
            source,
            ..
        }) if matches!(*source, Error::IterationLimit { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The iterations (sweep pairs) the device loop of `exec` made in its last completed run.
fn loop_iterations(exec: Option<&GraphExec>) -> Result<u32, BoxError> {
    exec.and_then(|exec| exec.loops().first())
        .map(|state| state.iterations())
        .ok_or_else(|| "the JacobiConverge graph has no device loop".into())
}

/// The device loop's iteration limit for at most `max_sweeps` sweeps, rounded up to a pair.
fn max_pairs(max_sweeps: u32) -> u32 {
    max_sweeps.div_ceil(2)
}

/// One solve, by either loop.
struct Solve {
    /// Sweeps run.
    iterations: u32,
    /// The residuals read, with the sweep each followed.
    residuals: Vec<(u32, f32)>,
    /// The last residual read.
    last: f32,
    /// Whether it ended on the tolerance (not on `--max-iters`).
    reached: bool,
    /// The solver loop's time.
    elapsed: Duration,
    /// How the sweeps ran, for the timings line.
    how: String,
    /// The latest grid, and the one before it.
    grid: Vec<f32>,
    before: Vec<f32>,
}

/// The host loop: one captured sweep replayed with a swap after each, the residual read
/// through the window every `--check-every` sweeps.
fn solve_from_host(
    pipeline: &mut JacobiStep,
    grids: &mut Grids,
    args: &JacobiArgs,
    setup: &Stream,
    report: &mut Report,
) -> Result<Solve, BoxError> {
    let start = Instant::now();
    let mut graph = pipeline.capture(grids.step(args.nx, args.ny))?;
    report.timings.add("capture", start.elapsed(), "");

    // Launch, swap (the next launch reads what this one writes), and every `--check-every`
    // sweeps the residual, read through the window after the replays.
    let bar = progress(u64::from(args.max_iters), args.quiet, "sweeps");
    let mut residuals = Vec::new();
    let mut iterations = 0u32;
    let mut last = f32::INFINITY;
    let start = Instant::now();
    while iterations < args.max_iters {
        graph.launch()?;
        graph.swap_u_u_new()?;
        iterations += 1;
        if iterations.is_multiple_of(args.check_every) || iterations == args.max_iters {
            last = graph.window()?.residual_host()?[0];
            residuals.push((iterations, last));
            bar.set_position(u64::from(iterations));
            if last < args.tol {
                break;
            }
        }
    }
    graph.synchronize()?;
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    // After the last swap `u` holds the latest grid and `u_new` the one before it.
    Ok(Solve {
        iterations,
        residuals,
        last,
        reached: last < args.tol,
        elapsed,
        how: format!("{iterations} sweeps"),
        grid: graph.params().u.to_vec(setup)?,
        before: graph.params().u_new.to_vec(setup)?,
    })
}

/// The device loop: [`JacobiConverge`] captured and uploaded, then one launch that sweeps
/// until the residual is at most `--tol` or `--max-iters` (rounded up to a pair) sweeps ran.
fn solve_on_device(
    pipeline: &mut JacobiConverge,
    grids: &mut Grids,
    args: &JacobiArgs,
    setup: &Stream,
    report: &mut Report,
) -> Result<Solve, BoxError> {
    let start = Instant::now();
    let params = grids.converge(args.nx, args.ny, args.tol, max_pairs(args.max_iters));
    let mut graph = pipeline.capture(params)?;
    if let Some(exec) = graph.exec() {
        exec.upload(setup)?;
    }
    setup.synchronize()?;
    report.timings.add(
        "capture",
        start.elapsed(),
        "the device loop, built and uploaded",
    );

    let start = Instant::now();
    graph.launch()?;
    let reached = reached(graph.synchronize())?;
    let elapsed = start.elapsed();
    let pairs = loop_iterations(graph.exec())?;
    let iterations = 2 * pairs;
    let last = graph.params().residual.to_vec(setup)?[0];
    // Each iteration sweeps `u -> u_new -> u`: `u` holds the latest grid, `u_new` the one
    // before it.
    Ok(Solve {
        iterations,
        residuals: vec![(iterations, last)],
        last,
        reached,
        elapsed,
        how: format!("{iterations} sweeps in one launch ({pairs} device-loop iterations)"),
        grid: graph.params().u.to_vec(setup)?,
        before: graph.params().u_new.to_vec(setup)?,
    })
}

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &JacobiArgs) -> Result<JacobiOutcome, BoxError> {
    args.validate()?;
    let mut report = Report::new(ctx);
    let (nx, ny) = (args.nx, args.ny);
    let cells = nx as usize * ny as usize;
    let init = initial_grid(nx, ny);

    let start = Instant::now();
    let setup = Stream::non_blocking(ctx)?;
    let mut grids = Grids::new(ctx, &setup, &init, nx, ny)?;
    let mut pipeline = JacobiStep::new(ctx)?;
    let mut converge = if args.device_loop {
        Some(JacobiConverge::new(ctx)?)
    } else {
        None
    };
    report
        .timings
        .add("setup", start.elapsed(), "alloc, upload, load kernels");

    let solve = match &mut converge {
        Some(converge) => solve_on_device(converge, &mut grids, args, &setup, &mut report)?,
        None => solve_from_host(&mut pipeline, &mut grids, args, &setup, &mut report)?,
    };
    let Solve {
        iterations,
        residuals,
        last,
        reached,
        elapsed,
        how,
        grid,
        before,
    } = solve;
    let per_iteration = elapsed.as_secs_f64() / f64::from(iterations);
    report.timings.add(
        "sweeps",
        elapsed,
        format!(
            "{how}, {:.2} µs each, {:.1} GB/s (8 bytes per cell)",
            per_iteration * 1e6,
            8.0 * cells as f64 / per_iteration / 1e9
        ),
    );
    report.notes.push(format!(
        "residual {last:.3e} after {iterations} sweeps (tolerance {:.1e}{})",
        args.tol,
        if reached {
            ""
        } else {
            ", not reached: raise --max-iters"
        }
    ));

    let start = Instant::now();
    let mut want_last = vec![0.0f32; cells];
    let want_residual = reference_sweep(&before, &mut want_last, nx, ny);
    report.checks.push(Check::at_most(
        "last sweep vs a CPU sweep of the grid before it (every cell)",
        "max |error|",
        max_abs_diff(&grid, &want_last),
        0.0,
    ));
    report.checks.push(Check::at_most(
        "last residual read vs the CPU's",
        "|error|",
        f64::from((last - want_residual).abs()),
        0.0,
    ));
    let updates = f64::from(iterations) * cells as f64;
    let full_reference = args.reference.full(updates);
    let note = if full_reference {
        let (mut a, mut b) = (init.clone(), init.clone());
        let mut cpu_residuals = Vec::with_capacity(iterations as usize);
        for _ in 0..iterations {
            cpu_residuals.push(reference_sweep(&a, &mut b, nx, ny));
            std::mem::swap(&mut a, &mut b);
        }
        report.checks.push(Check::at_most(
            format!("final grid vs CPU reference ({iterations} sweeps)"),
            "max |error|",
            max_abs_diff(&grid, &a),
            0.0,
        ));
        let worst = residuals
            .iter()
            .map(|&(k, r)| (r - cpu_residuals[k as usize - 1]).abs())
            .fold(0.0f32, f32::max);
        report.checks.push(Check::at_most(
            format!("every residual read ({}) vs the CPU's", residuals.len()),
            "max |error|",
            f64::from(worst),
            0.0,
        ));
        format!("every sweep, {} CPU threads", cpu_threads())
    } else {
        args.reference
            .partial_note("last sweep", updates, "cell updates")
    };
    report.timings.add("reference", start.elapsed(), note);
    report.checks.push(Check::no_races(ctx));

    if let Some(path) = &args.trace {
        let start = Instant::now();
        let profile = pipeline.profile(grids.step(nx, ny))?;
        report.write_trace(path, &profile)?;
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }
    Ok(JacobiOutcome {
        report,
        iterations,
        residual: last,
        grid,
        full_reference,
        seconds_per_iteration: per_iteration,
    })
}

/// The pipeline's side of the benchmark: `iterations` replays (after two warm-up replays,
/// one per arrangement) of the captured sweep with a swap after each and the residual read
/// through the window every `check_every`; returns the time and the final grid (to compare
/// with the raw-driver solver's, [`anchor::time_sweeps`], bit for bit).
pub fn time_sweeps(
    ctx: &Context,
    nx: u32,
    ny: u32,
    iterations: u32,
    check_every: u32,
) -> Result<(Duration, Vec<f32>), BoxError> {
    let init = initial_grid(nx, ny);
    let setup = Stream::non_blocking(ctx)?;
    let mut grids = Grids::new(ctx, &setup, &init, nx, ny)?;
    let mut pipeline = JacobiStep::new(ctx)?;
    pipeline.set_fault_tracking(false);
    let mut graph = pipeline.capture(grids.step(nx, ny))?;
    // Both arrangements captured, the graphs uploaded by a first launch each.
    for _ in 0..2 {
        graph.launch()?;
        graph.swap_u_u_new()?;
    }
    graph.synchronize()?;
    let start = Instant::now();
    for k in 1..=iterations {
        graph.launch()?;
        graph.swap_u_u_new()?;
        if k.is_multiple_of(check_every) {
            let residual = graph.window()?.residual_host()?[0];
            if !residual.is_finite() {
                return Err("the residual is not finite".into());
            }
        }
    }
    graph.synchronize()?;
    let elapsed = start.elapsed();
    Ok((elapsed, graph.params().u.to_vec(&setup)?))
}

/// The device loop's side of the tolerance benchmark: [`JacobiConverge`] to `tol` (at most
/// `max_sweeps` sweeps, rounded up to a pair), timed over one launch and its synchronize.
/// Returns the time, the sweeps run (twice the loop's iterations) and the final grid; ending
/// at the limit is not an error (the sweep count says so), as for
/// [`time_host_loop`], whose sweeps and grid it matches bit for bit.
///
/// Warm-up: a first graph runs one loop iteration (loading the kernels and the condition
/// kernel); the grids are then refilled with the initial grid and the timed graph is captured
/// and uploaded before the clock starts. (A captured graph borrows the grids for its whole
/// life, so the grids cannot be refilled under one graph between its launches.)
pub fn time_device_loop(
    ctx: &Context,
    nx: u32,
    ny: u32,
    tol: f32,
    max_sweeps: u32,
) -> Result<(Duration, u32, Vec<f32>), BoxError> {
    let init = initial_grid(nx, ny);
    let setup = Stream::non_blocking(ctx)?;
    let init_device = DeviceBuffer::from_slice(&setup, &init)?;
    let mut grids = Grids::new(ctx, &setup, &init, nx, ny)?;
    let mut pipeline = JacobiConverge::new(ctx)?;
    pipeline.set_fault_tracking(false);
    {
        let mut warm = pipeline.capture(grids.converge(nx, ny, tol, 1))?;
        warm.launch()?;
        reached(warm.synchronize())?;
    }
    grids.reset(&setup, &init_device)?;
    let mut graph = pipeline.capture(grids.converge(nx, ny, tol, max_pairs(max_sweeps)))?;
    if let Some(exec) = graph.exec() {
        exec.upload(&setup)?;
    }
    setup.synchronize()?;
    let start = Instant::now();
    graph.launch()?;
    let result = graph.synchronize();
    let elapsed = start.elapsed();
    reached(result)?;
    let sweeps = 2 * loop_iterations(graph.exec())?;
    Ok((elapsed, sweeps, graph.params().u.to_vec(&setup)?))
}

/// The host loop's side of the tolerance benchmark: [`JacobiPair`] (two sweeps, the reduction
/// and the residual's copy back: the same graph as the raw C++ host loop of
/// `benches/anchors/jacobi_while.cu`) replayed, the residual read through the window after
/// every launch, until it is at most `tol` (as the device loop tests it) or `max_sweeps`
/// sweeps (rounded up to a pair) ran. Returns the time, the sweeps run and the final grid.
///
/// Warm-up: a first graph runs one pair of sweeps; the grids are then refilled, and the
/// timed graph is captured and uploaded before the clock starts.
pub fn time_host_loop(
    ctx: &Context,
    nx: u32,
    ny: u32,
    tol: f32,
    max_sweeps: u32,
) -> Result<(Duration, u32, Vec<f32>), BoxError> {
    let init = initial_grid(nx, ny);
    let setup = Stream::non_blocking(ctx)?;
    let init_device = DeviceBuffer::from_slice(&setup, &init)?;
    let mut grids = Grids::new(ctx, &setup, &init, nx, ny)?;
    let mut pipeline = JacobiPair::new(ctx)?;
    pipeline.set_fault_tracking(false);
    {
        let mut warm = pipeline.capture(grids.pair(nx, ny))?;
        warm.launch()?;
        warm.synchronize()?;
    }
    grids.reset(&setup, &init_device)?;
    let mut graph = pipeline.capture(grids.pair(nx, ny))?;
    if let Some(exec) = graph.exec() {
        exec.upload(&setup)?;
    }
    setup.synchronize()?;
    let limit = max_pairs(max_sweeps);
    let mut pairs = 0u32;
    let start = Instant::now();
    while pairs < limit {
        // Two sweeps per launch (`u -> u_new -> u`), the residual tested after each launch.
        graph.launch()?;
        pairs += 1;
        let residual = graph.window()?.residual_host()?[0];
        // The device loop's test, NaN included: go on while `residual > tol`.
        let going = residual > tol;
        if !going {
            break;
        }
    }
    graph.synchronize()?;
    let elapsed = start.elapsed();
    Ok((elapsed, 2 * pairs, graph.params().u.to_vec(&setup)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_cpu_sweep_matches_the_reference_and_its_blocks() {
        let (nx, ny) = (37, 19);
        let init = initial_grid(nx, ny);
        let mut dst = vec![0.0; init.len()];
        let mut blocks = vec![-1.0; host::blocks(nx, ny)];
        host::jacobi_sweep(nx, ny, &init, &mut dst, &mut blocks);
        let mut want = vec![0.0; init.len()];
        let residual = reference_sweep(&init, &mut want, nx, ny);
        assert_eq!(dst, want);
        let mut out = [0.0];
        host::reduce_max(blocks.len() as u32, &blocks, &mut out);
        assert_eq!(out[0], residual);
        // The second row is the first to change: 0.25 next to the hot lid.
        assert_eq!(residual, 0.25);
    }

    #[test]
    fn jacobi_converges_towards_the_harmonic_solution() {
        let (nx, ny) = (12, 12);
        let (mut a, mut b) = (initial_grid(nx, ny), initial_grid(nx, ny));
        let mut residual = f32::INFINITY;
        for _ in 0..2000 {
            residual = reference_sweep(&a, &mut b, nx, ny);
            std::mem::swap(&mut a, &mut b);
        }
        assert!(residual < 1e-6, "{residual}");
        // Symmetric about the vertical middle line.
        let row = &a[6 * 12..7 * 12];
        assert!((row[1] - row[10]).abs() < 1e-6, "{row:?}");
    }
}
