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

pub mod anchor;
pub mod host;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

use crate::common::{
    BoxError, Check, POSITIVE, REFERENCE_BUDGET, ReferenceMode, Report, check_output_path,
    cpu_threads, float_in, max_abs_diff, par_chunks, progress,
};

gpu_pipeline! {
    /// One Jacobi sweep `u -> u_new` of the 2-D Laplace equation and its residual, copied
    /// back to pinned memory; `swap(u, u_new)` exchanges the grids between replays.
    pub pipeline JacobiStep {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../kernels/jacobi.ptx")) {
            fn jacobi_sweep(nx: u32, ny: u32, src: &[f32; nx * ny], dst: &mut [f32; nx * ny], block_max: &mut [f32])
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
    /// Stop after this many sweeps even if the tolerance is not reached.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iters: u32,
    /// Read the residual every this-many sweeps (1: after every sweep).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub check_every: u32,
    /// How much of the run to replay on the CPU: `auto` replays all of it when that costs at
    /// most 4e9 cell updates, else only the last sweep.
    #[arg(long, value_enum, default_value_t = ReferenceMode::Auto)]
    pub reference: ReferenceMode,
    /// Print the stage graph of one sweep (`JacobiStep::DOT`) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more sweep and write its per-stage timings as a Chrome
    /// trace (open it in ui.perfetto.dev).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

impl JacobiArgs {
    /// The rules clap cannot express: a writable trace file.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The stage graph `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        self.dot.then(|| JacobiStep::DOT.to_owned())
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

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &JacobiArgs) -> Result<JacobiOutcome, BoxError> {
    args.validate()?;
    let mut report = Report::new(ctx);
    let (nx, ny) = (args.nx, args.ny);
    let cells = nx as usize * ny as usize;
    let init = initial_grid(nx, ny);

    let start = Instant::now();
    let setup = Stream::non_blocking(ctx)?;
    let mut u = DeviceBuffer::from_slice(&setup, &init)?;
    let mut u_new = DeviceBuffer::from_slice(&setup, &init)?;
    let mut block_max = DeviceBuffer::<f32>::zeros(&setup, host::blocks(nx, ny))?;
    let mut residual = DeviceBuffer::<f32>::zeros(&setup, 1)?;
    let mut residual_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    setup.synchronize()?;
    let mut pipeline = JacobiStep::new(ctx)?;
    report
        .timings
        .add("setup", start.elapsed(), "alloc, upload, load kernels");

    let start = Instant::now();
    let mut graph = pipeline.capture(JacobiStepParams {
        nx,
        ny,
        u: &mut u,
        u_new: &mut u_new,
        block_max: &mut block_max,
        residual: &mut residual,
        residual_host: &mut residual_host,
    })?;
    report.timings.add("capture", start.elapsed(), "");

    // The solver loop: launch, swap (the next launch reads what this one writes), and every
    // `--check-every` sweeps the residual, read through the window after the replays.
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
    let per_iteration = elapsed.as_secs_f64() / f64::from(iterations);
    report.timings.add(
        "sweeps",
        elapsed,
        format!(
            "{iterations} sweeps, {:.2} µs each, {:.1} GB/s (8 bytes per cell)",
            per_iteration * 1e6,
            8.0 * cells as f64 / per_iteration / 1e9
        ),
    );
    report.notes.push(format!(
        "residual {last:.3e} after {iterations} sweeps (tolerance {:.1e}{})",
        args.tol,
        if last < args.tol {
            ""
        } else {
            ", not reached: raise --max-iters"
        }
    ));
    // After the last swap `u` holds the latest grid and `u_new` the one before it.
    let grid = graph.params().u.to_vec(&setup)?;
    let before = graph.params().u_new.to_vec(&setup)?;
    drop(graph);

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
        match args.reference {
            ReferenceMode::Bounded => "last sweep only (--reference bounded)".to_owned(),
            _ => format!(
                "last sweep only: replaying {updates:.1e} cell updates exceeds the budget of \
                 {REFERENCE_BUDGET:.0e} (--reference full forces it)"
            ),
        }
    };
    report.timings.add("reference", start.elapsed(), note);
    report.checks.push(Check::no_races(ctx));

    if let Some(path) = &args.trace {
        let start = Instant::now();
        let profile = pipeline.profile(JacobiStepParams {
            nx,
            ny,
            u: &mut u,
            u_new: &mut u_new,
            block_max: &mut block_max,
            residual: &mut residual,
            residual_host: &mut residual_host,
        })?;
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
    let mut u = DeviceBuffer::from_slice(&setup, &init)?;
    let mut u_new = DeviceBuffer::from_slice(&setup, &init)?;
    let mut block_max = DeviceBuffer::<f32>::zeros(&setup, host::blocks(nx, ny))?;
    let mut residual = DeviceBuffer::<f32>::zeros(&setup, 1)?;
    let mut residual_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    setup.synchronize()?;
    let mut pipeline = JacobiStep::new(ctx)?;
    pipeline.set_fault_tracking(false);
    let mut graph = pipeline.capture(JacobiStepParams {
        nx,
        ny,
        u: &mut u,
        u_new: &mut u_new,
        block_max: &mut block_max,
        residual: &mut residual,
        residual_host: &mut residual_host,
    })?;
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
