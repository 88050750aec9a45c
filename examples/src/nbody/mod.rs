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
//! A captured graph always contains its copy: a copy only every K steps would need a second
//! graph over the same `&mut` buffers (which the borrow rules forbid, rightly) or a stage that
//! a replay can switch off. Here the per-step copy costs nothing, being hidden.

pub mod host;

use std::time::Instant;

use clap::Parser;
use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

use crate::common::{BoxError, Check, Report, Rng, max_abs_diff, progress};

gpu_pipeline! {
    /// One kick-drift-kick leapfrog step of an all-pairs N-body system, positions copied back
    /// behind the force kernel.
    pub pipeline NbodyStep {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels nbody = ptx(include_str!("../../kernels/nbody.ptx")) {
            fn kick_drift(n: u32, dt: f32, acc: &[f32], vel: &mut [f32], pos: &mut [f32])
                host = crate::nbody::host::kick_drift;
            fn accel_kick(n: u32, dt: f32, eps2: f32, pos: &[f32], acc: &mut [f32],
                          vel: &mut [f32])
                host = crate::nbody::host::accel_kick;
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
            launch nbody::kick_drift(n, dt, acc, vel, pos) grid n.div_ceil(128) block 128;
        }
        stage save on copy {
            copy pos -> snapshot;
        }
        stage force on compute {
            launch nbody::accel_kick(n, dt, eps2, pos, acc, vel) grid n.div_ceil(128) block 128;
        }
        concurrent(save, force);
    }
}

/// Flags of the `nbody` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "nbody",
    about = "All-pairs N-body leapfrog as a captured two-stream gpu-pipeline; checks momentum \
             conservation and a short run against a CPU reference.",
    after_help = "Backend: CUDA device 0 when available, else the host backend; \
                  GPU_PIPELINE_BACKEND=cuda|host|host-checked forces one."
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
    /// Time step.
    #[arg(long, default_value_t = 1e-3)]
    pub dt: f32,
    /// Softening length (forces use r^2 + eps^2).
    #[arg(long, default_value_t = 0.05)]
    pub eps: f32,
    /// Steps of the run compared with a CPU reference (at most --steps).
    #[arg(long, default_value_t = 10)]
    pub reference_steps: u32,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

impl NbodyArgs {
    /// The rules between flags: the reference run is part of the run.
    pub fn validate(&self) -> Result<(), String> {
        if self.reference_steps > self.steps {
            return Err(format!(
                "--reference-steps {} exceeds --steps {}",
                self.reference_steps, self.steps
            ));
        }
        Ok(())
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

/// The CPU reference: `steps` leapfrog steps of `bodies` from the accelerations `acc`,
/// written over an array of body structs, apart from the kernels' host implementations.
pub fn reference_steps(bodies: &mut Bodies, acc: &mut [f32], dt: f32, eps2: f32, steps: u32) {
    let n = bodies.pos.len() / 4;
    let half = 0.5 * dt;
    for _ in 0..steps {
        for i in 0..n {
            for k in 0..3 {
                bodies.vel[4 * i + k] += acc[4 * i + k] * half;
                bodies.pos[4 * i + k] += bodies.vel[4 * i + k] * dt;
            }
        }
        let next: Vec<[f32; 3]> = (0..n)
            .map(|i| host::acceleration(&bodies.pos, n, i, eps2))
            .collect();
        for (i, a) in next.iter().enumerate() {
            acc[4 * i..4 * i + 3].copy_from_slice(a);
            for (v, a) in bodies.vel[4 * i..4 * i + 3].iter_mut().zip(a) {
                *v += a * half;
            }
        }
    }
}

/// The initial accelerations (what the first step's kick uses), computed on the host.
pub fn initial_acc(pos: &[f32], eps2: f32) -> Vec<f32> {
    let n = pos.len() / 4;
    let mut acc = vec![0.0f32; 4 * n];
    for i in 0..n {
        acc[4 * i..4 * i + 3].copy_from_slice(&host::acceleration(pos, n, i, eps2));
    }
    acc
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
}

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &NbodyArgs) -> Result<NbodyOutcome, BoxError> {
    args.validate()?;
    let mut report = Report::new(ctx);
    let n = args.bodies;
    let eps2 = args.eps * args.eps;
    let bodies = initial_bodies(n, 0x5eed);
    let acc0 = initial_acc(&bodies.pos, eps2);
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
        if step % args.sample_every == 0 || step == args.reference_steps || step == args.steps {
            graph.synchronize()?;
            samples.push((step, graph.params().snapshot.to_vec()?));
            bar.set_position(u64::from(step));
        }
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    let interactions = f64::from(n) * f64::from(n) * f64::from(args.steps);
    report.timings.add(
        "steps",
        elapsed,
        format!(
            "{} steps, {:.2} G interactions/s, {} samples",
            args.steps,
            interactions / elapsed.as_secs_f64() / 1e9,
            samples.len()
        ),
    );
    drop(graph);
    let final_vel = vel.to_vec(&setup)?;
    let final_pos = pos.to_vec(&setup)?;

    // Momentum: forces are pairwise antisymmetric, so `sum m v` stays put up to rounding.
    let (p, _) = momentum(&final_pos, &final_vel);
    let drift = (0..3).map(|k| (p[k] - p0[k]).powi(2)).sum::<f64>().sqrt() / scale;
    report.checks.push(Check::at_most(
        "momentum conservation",
        "|P - P0| / sum m|v|",
        drift,
        1e-4,
    ));

    // A short run against the CPU reference, compared with the sample at that step.
    let start = Instant::now();
    let mut want = bodies.clone();
    let mut want_acc = acc0;
    reference_steps(
        &mut want,
        &mut want_acc,
        args.dt,
        eps2,
        args.reference_steps,
    );
    report.timings.add(
        "reference",
        start.elapsed(),
        format!("{} steps on the CPU", args.reference_steps),
    );
    let got = if args.reference_steps == 0 {
        Some(&bodies.pos)
    } else {
        samples
            .iter()
            .find(|(s, _)| *s == args.reference_steps)
            .map(|(_, p)| p)
    };
    let error = got.map_or(f64::INFINITY, |got| max_abs_diff(got, &want.pos));
    report.checks.push(Check::at_most(
        format!(
            "positions after {} steps vs CPU reference",
            args.reference_steps
        ),
        "max |error|",
        error,
        1e-4,
    ));
    report.checks.push(Check::no_races(ctx));
    Ok(NbodyOutcome {
        report,
        samples,
        momentum_drift: drift,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two kernels' host implementations in pipeline order equal the reference bit for
    /// bit, and momentum stays within the example's tolerance.
    #[test]
    fn host_kernels_match_the_reference_and_conserve_momentum() {
        let (n, dt, eps2) = (200, 1e-3, 0.05f32 * 0.05);
        let bodies = initial_bodies(n, 3);
        let (p0, scale) = momentum(&bodies.pos, &bodies.vel);
        let mut acc = initial_acc(&bodies.pos, eps2);
        let (mut pos, mut vel) = (bodies.pos.clone(), bodies.vel.clone());
        let mut want = bodies.clone();
        let mut want_acc = acc.clone();
        for _ in 0..50 {
            host::kick_drift(n, dt, &acc, &mut vel, &mut pos);
            host::accel_kick(n, dt, eps2, &pos, &mut acc, &mut vel);
        }
        reference_steps(&mut want, &mut want_acc, dt, eps2, 50);
        assert_eq!(pos, want.pos);
        assert_eq!(vel, want.vel);
        let (p, _) = momentum(&pos, &vel);
        let drift = (0..3).map(|k| (p[k] - p0[k]).powi(2)).sum::<f64>().sqrt() / scale;
        assert!(drift < 1e-5, "{drift}");
        assert!(pos.iter().all(|x| x.is_finite()));
    }
}
