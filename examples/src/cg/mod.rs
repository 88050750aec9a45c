//! `cg`: the 2-D Poisson equation `A x = b` (the 5-point Laplacian, zero boundaries) solved by
//! conjugate gradient to a relative residual, the whole solve in one device loop.
//!
//! Every iteration's work stays on the device, the two dot products and the step scalars
//! `alpha` and `beta` included, and so does the convergence test: the loop is a device `while`
//! (a conditional WHILE node on CUDA) whose condition reads `rr = r . r`, so one graph launch
//! runs the whole solve and the host waits once:
//!
//! ```text
//! main:  x = 0; r = b; p = b; rr = r . r
//!        while rr > tol^2 |b|^2 (at most --max-iters times):
//!            ap = A p
//!            pap = p . ap
//!            x += alpha p; r -= alpha ap          alpha = rr / pap, on the device
//!            rr_new = r . r
//!            p = r + beta p                       beta = rr_new / rr, on the device
//!            rr = rr_new
//! ```
//!
//! The checks: the true residual `|b - A x| / |b|` of the answer, computed on the host; and,
//! when cheap enough (`--reference`), the plain CPU solver's answer and iteration count.

pub mod host;

use std::time::{Duration, Instant};

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

use crate::common::{BoxError, Check, POSITIVE, ReferenceMode, Report, float_in};

gpu_pipeline! {
    /// Conjugate gradient from `x = 0` while `r . r > tol2`, at most `max_iterations`
    /// iterations (then the synchronize reports `Error::IterationLimit`), in one launch.
    pub pipeline CgSolve {
        streams { main }
        unsafe kernels cg = ptx(include_str!("../../kernels/cg.ptx")) {
            fn poisson_apply(nx: u32, ny: u32, p: &[f64; nx * ny], ap: &mut [f64; nx * ny])
                cpu = crate::cg::host::poisson_apply;
            fn dot(n: u32, a: &[f64; n], b: &[f64; n], out: &mut [f64; 1])
                cpu = crate::cg::host::dot;
            fn update_xr(n: u32, rr: &[f64; 1], pap: &[f64; 1], p: &[f64; n], ap: &[f64; n],
                         x: &mut [f64; n], r: &mut [f64; n])
                cpu = crate::cg::host::update_xr;
            fn update_p(n: u32, rr: &[f64; 1], rr_new: &[f64; 1], r: &[f64; n], p: &mut [f64; n])
                cpu = crate::cg::host::update_p;
        }
        params {
            nx: u32,
            ny: u32,
            tol2: f64,
            max_iterations: u32,
            b: &DeviceBuffer<f64>,
            x: &mut DeviceBuffer<f64>,
            r: &mut DeviceBuffer<f64>,
            p: &mut DeviceBuffer<f64>,
            ap: &mut DeviceBuffer<f64>,
            rr: &mut DeviceBuffer<f64>,
            rr_new: &mut DeviceBuffer<f64>,
            pap: &mut DeviceBuffer<f64>,
        }
        stage solve on main {
            fill x = 0.0;
            copy b -> r;
            copy b -> p;
            fill rr = 0.0;
            launch cg::dot(nx * ny, r, r, rr)
                grid (nx * ny).div_ceil(256).min(DOT_BLOCKS) block 256u32;
            while rr > tol2 max max_iterations {
                launch cg::poisson_apply(nx, ny, p, ap)
                    grid (nx.div_ceil(32), ny.div_ceil(8)) block (32u32, 8u32);
                fill pap = 0.0;
                launch cg::dot(nx * ny, p, ap, pap)
                    grid (nx * ny).div_ceil(256).min(DOT_BLOCKS) block 256u32;
                launch cg::update_xr(nx * ny, rr, pap, p, ap, x, r)
                    grid (nx * ny).div_ceil(256) block 256u32;
                fill rr_new = 0.0;
                launch cg::dot(nx * ny, r, r, rr_new)
                    grid (nx * ny).div_ceil(256).min(DOT_BLOCKS) block 256u32;
                launch cg::update_p(nx * ny, rr, rr_new, r, p)
                    grid (nx * ny).div_ceil(256) block 256u32;
                copy rr_new -> rr;
            }
        }
    }
}

/// The most blocks a dot product launches: each thread strides over the vector, and fewer
/// blocks mean fewer atomic adds on the one result.
pub const DOT_BLOCKS: u32 = 1024;

/// Flags of the `cg` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "cg",
    about = "The 2-D Poisson equation by conjugate gradient to a relative residual, the whole \
             solve (dot products, step scalars and convergence test included) in one device \
             loop; checked against the equation and a CPU solver.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one."
)]
pub struct CgArgs {
    /// Grid width in cells (unknowns per row).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub nx: u32,
    /// Grid height in cells.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub ny: u32,
    /// Stop when |r| <= tol |b| (the solver's own residual).
    #[arg(long, default_value_t = 1e-8, value_parser = float_in(POSITIVE))]
    pub tol: f32,
    /// Stop after this many iterations even if the tolerance is not reached.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iters: u32,
    /// Whether to run the CPU solver too: `auto` runs it when it costs at most 4e9 cell
    /// updates.
    #[arg(long, value_enum, default_value_t = ReferenceMode::Auto)]
    pub reference: ReferenceMode,
    /// Print the stage graph of the solve (`CgSolve::DOT`) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

impl CgArgs {
    /// No rule beyond clap's: every combination of flags is valid.
    pub fn validate(&self) -> Result<(), String> {
        Ok(())
    }

    /// The stage graph `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        self.dot.then(|| CgSolve::DOT.to_owned())
    }
}

/// What a run found, for the example's `main` and the tests.
#[derive(Debug)]
pub struct CgOutcome {
    /// The checks, timings and notes.
    pub report: Report,
    /// The iterations the device loop made.
    pub iterations: u32,
    /// Whether the loop ended on the tolerance rather than at `--max-iters`.
    pub reached: bool,
    /// `|b - A x| / |b|` of the answer.
    pub relative_residual: f64,
    /// The answer.
    pub x: Vec<f64>,
    /// The time of one whole solve (the second launch of the captured graph).
    pub solve_time: Duration,
    /// Whether the CPU solver ran and was compared.
    pub full_reference: bool,
}

impl CgOutcome {
    /// Seconds per iteration of the timed solve.
    pub fn seconds_per_iteration(&self) -> f64 {
        self.solve_time.as_secs_f64() / f64::from(self.iterations.max(1))
    }
}

/// The right-hand side: a unit source in every cell.
pub fn rhs(nx: u32, ny: u32) -> Vec<f64> {
    vec![1.0; nx as usize * ny as usize]
}

/// The solver's device buffers.
struct Vectors {
    b: DeviceBuffer<f64>,
    x: DeviceBuffer<f64>,
    r: DeviceBuffer<f64>,
    p: DeviceBuffer<f64>,
    ap: DeviceBuffer<f64>,
    rr: DeviceBuffer<f64>,
    rr_new: DeviceBuffer<f64>,
    pap: DeviceBuffer<f64>,
}

impl Vectors {
    fn new(stream: &Stream, b: &[f64]) -> Result<Vectors, BoxError> {
        let n = b.len();
        let zeros = |len: usize, name: &str| -> Result<DeviceBuffer<f64>, BoxError> {
            Ok(DeviceBuffer::zeros(stream, len)?.named(name))
        };
        Ok(Vectors {
            b: DeviceBuffer::from_slice(stream, b)?.named("b"),
            x: zeros(n, "x")?,
            r: zeros(n, "r")?,
            p: zeros(n, "p")?,
            ap: zeros(n, "ap")?,
            rr: zeros(1, "rr")?,
            rr_new: zeros(1, "rr_new")?,
            pap: zeros(1, "pap")?,
        })
    }

    fn params(&mut self, args: &CgArgs, tol2: f64) -> CgSolveParams<'_> {
        CgSolveParams {
            nx: args.nx,
            ny: args.ny,
            tol2,
            max_iterations: args.max_iters,
            b: &self.b,
            x: &mut self.x,
            r: &mut self.r,
            p: &mut self.p,
            ap: &mut self.ap,
            rr: &mut self.rr,
            rr_new: &mut self.rr_new,
            pap: &mut self.pap,
        }
    }
}

/// What the synchronize after a launch says: `Ok(true)` when the loop ended on the tolerance,
/// `Ok(false)` when it stopped at `max_iterations` (the answer is valid, only not converged),
/// any other error as it is.
fn reached(result: gpu_pipeline::Result<()>) -> Result<bool, BoxError> {
    match result {
        Ok(()) => Ok(true),
        Err(Error::Step {
            pipeline: "CgSolve",
            source,
            ..
        }) if matches!(*source, Error::IterationLimit { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &CgArgs) -> Result<CgOutcome, BoxError> {
    args.validate()?;
    let mut report = Report::new(ctx);
    let b = rhs(args.nx, args.ny);
    let bb: f64 = b.iter().map(|v| v * v).sum();
    let tol = f64::from(args.tol);
    let tol2 = tol * tol * bb;

    let start = Instant::now();
    let stream = Stream::non_blocking(ctx)?;
    let mut vectors = Vectors::new(&stream, &b)?;
    let mut pipeline = CgSolve::new(ctx)?;
    let mut graph = pipeline.capture(vectors.params(args, tol2))?;
    if let Some(exec) = graph.exec() {
        exec.upload(&stream)?;
    }
    stream.synchronize()?;
    report
        .timings
        .add("setup", start.elapsed(), "alloc, upload, capture");

    // The first launch loads what the driver loads lazily; the second, the same solve from
    // x = 0 again, is the one timed.
    graph.launch()?;
    reached(graph.synchronize())?;
    let start = Instant::now();
    graph.launch()?;
    let reached = reached(graph.synchronize())?;
    let solve_time = start.elapsed();
    let iterations = graph
        .exec()
        .and_then(|exec| exec.loops().first())
        .map(|state| state.iterations())
        .ok_or("the CgSolve graph has no device loop")?;
    report.timings.add(
        "solve",
        solve_time,
        format!(
            "{iterations} iterations in one launch, {:.2} µs each",
            solve_time.as_secs_f64() * 1e6 / f64::from(iterations.max(1))
        ),
    );
    let x = graph.params().x.to_vec(&stream)?;
    drop(graph);

    let relative_residual = host::relative_residual(args.nx, args.ny, &b, &x);
    // The recurrence's residual drifts from the true one by rounding only (1e-13 here).
    let limit = if reached { 2.0 * tol } else { f64::INFINITY };
    report.checks.push(Check::at_most(
        "|b - A x| / |b| of the answer",
        "relative residual",
        relative_residual,
        limit,
    ));
    if !reached {
        report.notes.push(format!(
            "tolerance {:e} not reached in --max-iters {} iterations: relative residual \
             {relative_residual:.3e}",
            args.tol, args.max_iters
        ));
    }

    let cells = f64::from(args.nx) * f64::from(args.ny);
    let work = cells * f64::from(iterations);
    let full_reference = args.reference.full(work);
    let start = Instant::now();
    if full_reference {
        let (want, cpu_iterations) = host::solve(args.nx, args.ny, &b, tol2, args.max_iters);
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let diff = want
            .iter()
            .zip(&x)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        report.checks.push(Check::at_most(
            "x vs the CPU solver's",
            "max |error| / max |x|",
            diff / scale.max(f64::MIN_POSITIVE),
            1e-6,
        ));
        // The dot products' sums round differently on a GPU: the loop may end an iteration or
        // two either side of the CPU's near the tolerance.
        let slack = 2 + cpu_iterations / 100;
        report.checks.push(Check::at_most(
            format!("iterations ({iterations}) vs the CPU solver's ({cpu_iterations})"),
            "difference",
            f64::from(iterations.abs_diff(cpu_iterations)),
            f64::from(slack),
        ));
        report.timings.add(
            "CPU solver",
            start.elapsed(),
            format!("{cpu_iterations} iterations"),
        );
    } else {
        report.notes.push(
            args.reference
                .partial_note("the true residual", work, "cell updates"),
        );
    }
    report.checks.push(Check::no_races(ctx));
    report.notes.push(format!(
        "{}x{} grid, tolerance {:e}: {iterations} iterations, relative residual \
         {relative_residual:.3e}",
        args.nx, args.ny, args.tol
    ));
    Ok(CgOutcome {
        report,
        iterations,
        reached,
        relative_residual,
        x,
        solve_time,
        full_reference,
    })
}
