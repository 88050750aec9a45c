//! `nbody`: an all-pairs gravitational N-body simulation, kick-drift-kick leapfrog.
//!
//! One step is two kernels on the `compute` stream; the positions are copied back to pinned
//! memory on the `copy` stream while the force kernel runs:
//!
//! ```text
//! compute (high priority):  drift: v += a dt/2, x += v dt ──▶ force: a(x), v += a dt/2
//!                                         │
//! copy:                                   └─ save: pos -> snapshot (pinned)
//! ```
//!
//! `save` only reads `pos`, like `force`, so the two overlap (`concurrent(save, force)` is
//! verified by the macro) and the copy is hidden behind the O(n²) force kernel. The step is
//! captured once and replayed; every `--sample-every` steps the host waits and records the
//! positions from the snapshot (the trajectory a visualisation would stream).
//!
//! The force kernel is the one a CUDA programmer writes (tiles of bodies in shared memory,
//! `rsqrtf`; see `examples/kernels/nbody.cu`), so the run is checked against its CPU
//! reference within tolerances: the accelerations of a sample of bodies against a CPU sum in
//! f64 at the final positions, momentum conservation, and, when it is affordable
//! (`--reference`), the positions after `--reference-steps` steps against a CPU replay. On
//! CUDA the run ends with a speed comparison against the well-known tiled kernel launched
//! with raw driver calls ([`anchor`]), at the same body count and step count.
//!
//! A captured graph always contains its copy: a copy only every K steps would need a second
//! graph over the same `&mut` buffers (which the borrow rules forbid, rightly) or a stage that
//! a replay can switch off. Here the per-step copy costs nothing, being hidden.

pub mod anchor;
pub mod cpu;

use std::ops::Bound;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use gpu_pipeline::{Backend, Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

use crate::common::{
    BoxError, Check, POSITIVE, ReferenceMode, Report, Rng, check_cpu_cost, check_output_path,
    cpu_threads, first_non_finite, float_in, max_abs_diff, par_chunks, progress,
};

gpu_pipeline! {
    /// One kick-drift-kick leapfrog step of an all-pairs N-body system, positions copied back
    /// behind the force kernel.
    pub pipeline NbodyStep {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels nbody = ptx(include_str!("../../kernels/nbody.ptx")) {
            // Bodies are `float4`s: each kernel indexes its buffers below `4 * n` floats,
            // which the runtime checks the buffers hold before every step and capture.
            fn kick_drift(n: u32, dt: f32, acc: &[f32; 4 * n], vel: &mut [f32; 4 * n],
                          pos: &mut [f32; 4 * n])
                cpu = crate::nbody::cpu::kick_drift;
            fn accel_kick(n: u32, dt: f32, eps2: f32, pos: &[f32; 4 * n],
                          acc: &mut [f32; 4 * n], vel: &mut [f32; 4 * n])
                cpu = crate::nbody::cpu::accel_kick;
        }
        params {
            n: u32,
            dt: f32,
            eps2: f32,
            pos: &mut DeviceBuffer<f32>,
            vel: &mut DeviceBuffer<f32>,
            acc: &mut DeviceBuffer<f32>,
            snapshot: &mut PinnedBuffer<f32>,
        }
        stage drift on compute {
            launch nbody::kick_drift(n, dt, acc, vel, pos) grid n.div_ceil(256) block 256;
        }
        stage save on copy {
            copy pos -> snapshot;
        }
        stage force on compute {
            // 256 threads per block: the kernel's shared-memory tile holds 256 bodies.
            launch nbody::accel_kick(n, dt, eps2, pos, acc, vel) grid n.div_ceil(256) block 256;
        }
        concurrent(save, force);
    }
}

/// Flags of the `nbody` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "nbody",
    about = "All-pairs N-body leapfrog as a captured two-stream gpu-pipeline; checks momentum \
             conservation and accelerations against a CPU reference, and on CUDA compares its \
             speed with the classic tiled N-body kernel launched with raw driver calls.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one.",
    allow_negative_numbers = true
)]
pub struct NbodyArgs {
    /// Number of bodies.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    pub bodies: u32,
    /// Time steps.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub steps: u32,
    /// Record the positions every this many steps.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub sample_every: u32,
    /// Time step, at most 1 (the bodies start in the unit ball with a total mass of 1, so a
    /// larger step only produces overflow); a run whose state stops being finite stops with
    /// an error naming the step.
    #[arg(long, default_value_t = 1e-3, value_parser = float_in(DT_RANGE), allow_hyphen_values = true)]
    pub dt: f32,
    /// Softening length (forces use r^2 + eps^2).
    #[arg(long, default_value_t = 0.05, value_parser = float_in(POSITIVE), allow_hyphen_values = true)]
    pub eps: f32,
    /// Steps of the run replayed on the CPU and compared (at most --steps; 0: none)
    /// [default: 10, or --steps if fewer].
    #[arg(long = "reference-steps", value_name = "STEPS", value_parser = clap::value_parser!(u32).range(0..))]
    pub reference_steps_flag: Option<u32>,
    /// Whether to replay --reference-steps on the CPU: `auto` does when that costs at most
    /// 4e9 body pairs; the sampled accelerations and momentum are checked in any case.
    #[arg(long, value_enum, default_value_t = ReferenceMode::Auto)]
    pub reference: ReferenceMode,
    /// Skip the speed comparison with the tiled kernel launched with raw driver calls.
    #[arg(long)]
    pub no_anchor: bool,
    /// Print the stage graph of one step (`NbodyStep::DOT`) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more step and write its per-stage timings as a Chrome
    /// trace (open it in ui.perfetto.dev).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
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

/// The time steps accepted: above 0, at most 1.
pub const DT_RANGE: (Bound<f32>, Bound<f32>) = (Bound::Excluded(0.0), Bound::Included(1.0));

/// Body pairs a second one CPU core gets through (a generous guess: the estimate errs short).
const CPU_PAIRS_PER_CORE: f64 = 5e8;

impl NbodyArgs {
    /// The rules between flags: the reference run is part of the run; the trace file can be
    /// written.
    pub fn validate(&self) -> Result<(), String> {
        if self.reference_steps() > self.steps {
            return Err(format!(
                "--reference-steps {} exceeds --steps {}",
                self.reference_steps(),
                self.steps
            ));
        }
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The stage graph `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        self.dot.then(|| NbodyStep::DOT.to_owned())
    }

    /// Steps replayed on the CPU: `--reference-steps`, by default 10 or `--steps` if fewer.
    pub fn reference_steps(&self) -> u32 {
        self.reference_steps_flag.unwrap_or(self.steps.min(10))
    }
}

/// Bodies as 4 floats each: positions `(x, y, z, m)` and velocities `(vx, vy, vz, 0)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Bodies {
    /// `(x, y, z, mass)` per body.
    pub pos: Vec<f32>,
    /// `(vx, vy, vz, 0)` per body.
    pub vel: Vec<f32>,
}

/// `n` bodies of mass `1/n` uniformly in the unit ball, with small random velocities whose
/// total momentum is removed (the centre of mass rests).
pub fn initial_bodies(n: u32, seed: u64) -> Bodies {
    let mut rng = Rng::new(seed);
    let n = n as usize;
    let mut pos = Vec::with_capacity(4 * n);
    let mut vel = Vec::with_capacity(4 * n);
    let mass = 1.0 / n as f32;
    while pos.len() < 4 * n {
        let p = [0; 3].map(|_| 2.0 * rng.next_f32() - 1.0);
        if p.iter().map(|c| c * c).sum::<f32>() > 1.0 {
            continue;
        }
        pos.extend_from_slice(&[p[0], p[1], p[2], mass]);
        let v = [0; 3].map(|_| 0.3 * (rng.next_f32() - 0.5));
        vel.extend_from_slice(&[v[0], v[1], v[2], 0.0]);
    }
    let mean: [f32; 3] = [0, 1, 2].map(|k| (0..n).map(|i| vel[4 * i + k]).sum::<f32>() / n as f32);
    for i in 0..n {
        for k in 0..3 {
            vel[4 * i + k] -= mean[k];
        }
    }
    Bodies { pos, vel }
}

/// The total momentum `sum m v` and the scale `sum m |v|` it is measured against, in f64.
pub fn momentum(pos: &[f32], vel: &[f32]) -> ([f64; 3], f64) {
    let mut p = [0.0f64; 3];
    let mut scale = 0.0;
    for (x, v) in pos.chunks_exact(4).zip(vel.chunks_exact(4)) {
        let m = f64::from(x[3]);
        let mut speed2 = 0.0;
        for k in 0..3 {
            p[k] += m * f64::from(v[k]);
            speed2 += f64::from(v[k]).powi(2);
        }
        scale += m * speed2.sqrt();
    }
    (p, scale)
}

/// The CPU reference's acceleration of body `i`: the textbook `m d / (r^2 (r^2)^(1/2))`, in
/// f32, written apart from the kernel's CPU implementation.
fn reference_acceleration(pos: &[f32], i: usize, eps2: f32) -> [f32; 3] {
    let xi = [pos[4 * i], pos[4 * i + 1], pos[4 * i + 2]];
    let mut a = [0.0f32; 3];
    for body in pos.chunks_exact(4) {
        let d = [body[0] - xi[0], body[1] - xi[1], body[2] - xi[2]];
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2;
        let s = body[3] / (r2 * r2.sqrt());
        for k in 0..3 {
            a[k] += d[k] * s;
        }
    }
    a
}

/// Every body's acceleration `(ax, ay, az, 0)` by the CPU reference, on all cores.
pub fn accelerations(pos: &[f32], eps2: f32) -> Vec<f32> {
    let mut acc = vec![0.0f32; pos.len()];
    par_chunks(&mut acc, 4, |first, out| {
        for (k, a) in out.chunks_exact_mut(4).enumerate() {
            a[..3].copy_from_slice(&reference_acceleration(pos, first / 4 + k, eps2));
        }
    });
    acc
}

/// The CPU reference: `steps` leapfrog steps of `bodies` from the accelerations `acc`.
pub fn reference_steps(bodies: &mut Bodies, acc: &mut Vec<f32>, dt: f32, eps2: f32, steps: u32) {
    let half = 0.5 * dt;
    for _ in 0..steps {
        for ((x, v), a) in bodies
            .pos
            .chunks_exact_mut(4)
            .zip(bodies.vel.chunks_exact_mut(4))
            .zip(acc.chunks_exact(4))
        {
            for k in 0..3 {
                v[k] += a[k] * half;
                x[k] += v[k] * dt;
            }
        }
        *acc = accelerations(&bodies.pos, eps2);
        for (v, a) in bodies.vel.chunks_exact_mut(4).zip(acc.chunks_exact(4)) {
            for k in 0..3 {
                v[k] += a[k] * half;
            }
        }
    }
}

/// The largest error of the accelerations `got` of the sampled bodies `sample` against an
/// f64 sum over all bodies at `pos`, relative to the sum of the pulls' magnitudes (the scale
/// at which float rounding works).
pub fn sampled_acceleration_error(pos: &[f32], got: &[f32], eps2: f32, sample: &[usize]) -> f64 {
    let eps2 = f64::from(eps2);
    let mut worst = 0.0f64;
    for &i in sample {
        let xi = [0, 1, 2].map(|k| f64::from(pos[4 * i + k]));
        let (mut a, mut scale) = ([0.0f64; 3], 0.0f64);
        for body in pos.chunks_exact(4) {
            let d = [0, 1, 2].map(|k| f64::from(body[k]) - xi[k]);
            let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2;
            let s = f64::from(body[3]) / (r2 * r2.sqrt());
            for k in 0..3 {
                a[k] += d[k] * s;
            }
            scale += s * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        }
        let error = (0..3)
            .map(|k| (f64::from(got[4 * i + k]) - a[k]).powi(2))
            .sum::<f64>()
            .sqrt();
        let relative = error / scale.max(f64::MIN_POSITIVE);
        worst = worst.max(if relative.is_nan() {
            f64::INFINITY
        } else {
            relative
        });
    }
    worst
}

/// Up to 256 bodies spread evenly over `0..n`: the ones whose accelerations are checked.
pub fn sample_bodies(n: usize) -> Vec<usize> {
    let count = n.min(256);
    (0..count).map(|k| k * n / count).collect()
}

/// What a run produced besides its report.
#[derive(Clone, Debug)]
pub struct NbodyOutcome {
    /// Backend, checks and timings.
    pub report: Report,
    /// The recorded positions: `(step, (x, y, z, m) per body)`.
    pub samples: Vec<(u32, Vec<f32>)>,
    /// The relative momentum drift at the end.
    pub momentum_drift: f64,
    /// Whether `--reference-steps` were replayed on the CPU and compared.
    pub full_reference: bool,
    /// Body-body interactions per second of the main run (sampling included).
    pub interactions_per_second: f64,
    /// The speed comparison with the raw-driver kernel (CUDA only, without `--no-anchor`).
    pub anchor: Option<anchor::Comparison>,
}

/// Runs the example on `ctx`, then the checks and, on CUDA, the speed comparison.
pub fn run(ctx: &Context, args: &NbodyArgs) -> Result<NbodyOutcome, BoxError> {
    args.validate()?;
    let replayed = args.reference_steps();
    let n = args.bodies;
    let pairs = f64::from(n) * f64::from(n);
    // The steps, the initial forces and the reference all cost `pairs` each.
    let steps = f64::from(args.steps) + 1.0 + f64::from(replayed);
    check_cpu_cost(
        ctx,
        args.cpu_anyway,
        pairs * steps,
        CPU_PAIRS_PER_CORE,
        "body pairs",
    )?;
    let mut report = Report::new(ctx);
    let eps2 = args.eps * args.eps;
    let bodies = initial_bodies(n, 0x5eed);
    let start = Instant::now();
    let acc0 = accelerations(&bodies.pos, eps2);
    report.timings.add(
        "initial forces",
        start.elapsed(),
        format!("CPU, {} threads", cpu_threads()),
    );
    let (p0, scale) = momentum(&bodies.pos, &bodies.vel);

    let start = Instant::now();
    let setup = Stream::non_blocking(ctx)?;
    let mut pos = DeviceBuffer::from_slice(&setup, &bodies.pos)?;
    let mut vel = DeviceBuffer::from_slice(&setup, &bodies.vel)?;
    let mut acc = DeviceBuffer::from_slice(&setup, &acc0)?;
    let mut snapshot = PinnedBuffer::<f32>::zeros(ctx, bodies.pos.len())?;
    let mut pipeline = NbodyStep::new(ctx)?;
    report
        .timings
        .add("setup", start.elapsed(), "alloc, upload, load kernels");

    let start = Instant::now();
    let mut graph = pipeline.capture(NbodyStepParams {
        n,
        dt: args.dt,
        eps2,
        pos: &mut pos,
        vel: &mut vel,
        acc: &mut acc,
        snapshot: &mut snapshot,
    })?;
    report.timings.add("capture", start.elapsed(), "");

    let bar = progress(u64::from(args.steps), args.quiet, "steps");
    let mut samples = Vec::new();
    let start = Instant::now();
    for step in 1..=args.steps {
        graph.launch()?;
        if step % args.sample_every == 0 || step == replayed || step == args.steps {
            graph.synchronize()?;
            let sample = graph.params().snapshot.to_vec()?;
            if let Some(at) = first_non_finite(&sample) {
                bar.finish_and_clear();
                return Err(format!(
                    "the positions stopped being finite by step {step} (body {}): --dt {} is \
                     too large for --eps {}; take a smaller step",
                    at / 4,
                    args.dt,
                    args.eps
                )
                .into());
            }
            samples.push((step, sample));
            bar.set_position(u64::from(step));
        }
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    let rate = pairs * f64::from(args.steps) / elapsed.as_secs_f64();
    report.timings.add(
        "steps",
        elapsed,
        format!(
            "{} steps, {:.2} G interactions/s, {} samples",
            args.steps,
            rate / 1e9,
            samples.len()
        ),
    );
    let final_pos = graph.params().pos.to_vec(&setup)?;
    let final_vel = graph.params().vel.to_vec(&setup)?;
    let final_acc = graph.params().acc.to_vec(&setup)?;

    // Momentum: forces are pairwise antisymmetric, so `sum m v` stays put up to rounding.
    let (p, _) = momentum(&final_pos, &final_vel);
    let drift = (0..3).map(|k| (p[k] - p0[k]).powi(2)).sum::<f64>().sqrt() / scale;
    report.checks.push(Check::at_most(
        "momentum conservation",
        "|P - P0| / sum m|v|",
        drift,
        1e-4,
    ));

    // The force kernel at full size: the last step's accelerations of a sample of bodies
    // against an f64 sum at the same positions. rsqrtf's 2 ulp and the f32 sum stay far
    // below the limit; a wrong pull of one body in a thousand does not.
    let start = Instant::now();
    let sample = sample_bodies(n as usize);
    report.checks.push(Check::at_most(
        format!(
            "accelerations of {} sampled bodies vs an f64 CPU sum",
            sample.len()
        ),
        "max |error| / sum of pull magnitudes",
        sampled_acceleration_error(&final_pos, &final_acc, eps2, &sample),
        1e-5,
    ));

    // The trajectory: positions after --reference-steps steps against a CPU replay. Float
    // rounding differs every step (rsqrtf, FMA, the formula), so the limit grows with the
    // steps replayed.
    let full_reference = replayed > 0 && args.reference.full(pairs * f64::from(replayed));
    let note = if full_reference {
        let mut want = bodies.clone();
        let mut want_acc = acc0;
        reference_steps(&mut want, &mut want_acc, args.dt, eps2, replayed);
        let got = samples.iter().find(|(s, _)| *s == replayed).map(|(_, p)| p);
        let error = got.map_or(f64::INFINITY, |got| max_abs_diff(got, &want.pos));
        report.checks.push(Check::at_most(
            format!("positions after {} steps vs CPU reference", replayed),
            "max |error|",
            error,
            1e-6 * f64::from(replayed.max(10)),
        ));
        format!(
            "sampled forces; {} steps replayed on {} CPU threads",
            replayed,
            cpu_threads()
        )
    } else if replayed == 0 {
        "sampled forces; no replay (--reference-steps 0)".to_owned()
    } else {
        args.reference
            .partial_note("sampled forces", pairs * f64::from(replayed), "body pairs")
    };
    report.timings.add("reference", start.elapsed(), note);
    report.checks.push(Check::no_races(ctx));

    // The speed comparison, after the checks (its replays advance the state further).
    let anchor = match ctx.backend() {
        Backend::Cuda if !args.no_anchor => {
            let steps = anchor::benchmark_steps(n);
            graph.launch()?;
            graph.synchronize()?;
            let start = Instant::now();
            for _ in 0..steps {
                graph.launch()?;
            }
            graph.synchronize()?;
            let ours = pairs * f64::from(steps) / start.elapsed().as_secs_f64();
            let theirs = anchor::interactions_per_second(ctx, &bodies, args.dt, eps2, steps)?;
            let comparison = anchor::Comparison {
                steps,
                ours,
                anchor: theirs,
            };
            report.notes.push(comparison.to_string());
            Some(comparison)
        }
        Backend::Cuda => None,
        Backend::Cpu => {
            report.notes.push(
                "speed comparison: skipped on the CPU backend (the anchor is PTX launched \
                 through the CUDA driver)"
                    .to_owned(),
            );
            None
        }
    };
    drop(graph);

    if let Some(path) = &args.trace {
        let start = Instant::now();
        let profile = pipeline.profile(NbodyStepParams {
            n,
            dt: args.dt,
            eps2,
            pos: &mut pos,
            vel: &mut vel,
            acc: &mut acc,
            snapshot: &mut snapshot,
        })?;
        report.write_trace(path, &profile)?;
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }
    Ok(NbodyOutcome {
        report,
        samples,
        momentum_drift: drift,
        full_reference,
        interactions_per_second: rate,
        anchor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two kernels' CPU implementations in pipeline order agree with the reference to
    /// float rounding, and momentum stays within the example's tolerance.
    #[test]
    fn cpu_kernels_match_the_reference_and_conserve_momentum() {
        let (n, dt, eps2) = (200, 1e-3, 0.05f32 * 0.05);
        let bodies = initial_bodies(n, 3);
        let (p0, scale) = momentum(&bodies.pos, &bodies.vel);
        let mut acc = accelerations(&bodies.pos, eps2);
        let (mut pos, mut vel) = (bodies.pos.clone(), bodies.vel.clone());
        let mut want = bodies.clone();
        let mut want_acc = acc.clone();
        for _ in 0..50 {
            cpu::kick_drift(n, dt, &acc, &mut vel, &mut pos);
            cpu::accel_kick(n, dt, eps2, &pos, &mut acc, &mut vel);
        }
        reference_steps(&mut want, &mut want_acc, dt, eps2, 50);
        assert!(
            max_abs_diff(&pos, &want.pos) < 1e-5,
            "{}",
            max_abs_diff(&pos, &want.pos)
        );
        assert!(
            max_abs_diff(&vel, &want.vel) < 1e-5,
            "{}",
            max_abs_diff(&vel, &want.vel)
        );
        let (p, _) = momentum(&pos, &vel);
        let drift = (0..3).map(|k| (p[k] - p0[k]).powi(2)).sum::<f64>().sqrt() / scale;
        assert!(drift < 1e-5, "{drift}");
        assert!(pos.iter().all(|x| x.is_finite()));
    }
}
