//! Issue 14's comparisons, measured in one run on one GPU.
//!
//! | table | compares |
//! | --- | --- |
//! | jacobi | the `jacobi` example's solver (one captured sweep, `swap_u_u_new` after each replay, the residual read through the window every k sweeps) against the same solver written with raw driver calls and one graph per parity (`examples/src/jacobi/anchor.rs`), per sweep, at 512x512 and 4096x4096, with the residual read after every sweep and every 20th |
//! | jacobi to tolerance | `jacobi --device-loop` (the solve as one launch: a device `while` loop, two sweeps and one reduction per iteration, `jacobi::time_device_loop`) against the host loop (`JacobiPair`, two sweeps, the reduction and the residual's copy back captured once and replayed, the residual read after every launch: the same sweeps per launch as the raw C++ host loop of `benches/anchors/jacobi_while.cu`, so both stop at the same sweep, `jacobi::time_host_loop`), per sweep, at 512x512 and 4096x4096 to a residual of 1e-4; the raw C++ WHILE-node loop is `benches/anchors/jacobi_while.cu`, run on its own |
//! | stream_chunks | the `stream_chunks` example's passes over 64 MiB (chunks as ranges of one array on a stream array; passes running ahead, and closed) against the two-way copy limit (a host-to-device and a device-to-host copy of the whole array at once, as `tests/benches/overlap.rs` measures it) |
//!
//! Every case runs once to warm up, then `REPS` times (jacobi: the two solvers interleaved,
//! each rep starting with the other);
//! the tables show medians (jacobi) and bests (stream_chunks, whose passes are timed
//! together); jacobi to tolerance runs each loop `TOL_REPS` times, interleaved (each run
//! warms up on its own), and shows medians. The jacobi solvers' final grids must agree bit
//! for bit (and to tolerance, their sweep counts), and every stream_chunks output is checked
//! against the CPU. Without a GPU it says so and exits
//! successfully; `-- --check-host` runs the pipeline sides on the checked CPU backend at a
//! tiny size and fails on a wrong result or a race.
//!
//! `cargo bench -p examples --bench language`; on the GPU machine `bash .gpu/run bench
//! language` (or the built binary). Results also go to `target/bench/language.json`.
//!
//! `-- --host-cost [SWEEPS]` times only the host's work of the jacobi 512x512 row with the
//! residual read after every sweep (ours against the raw calls, five alternating rounds):
//! run it against the do-nothing driver of `tools/fake-driver` (`GPU_PIPELINE_LIBCUDA`), where
//! the GPU's time is zero, to see what the launch, the swap and the window read cost.
//! `-- --device-loop-repeat [N]` runs the 512x512 device loop to 1e-4 N times in a row (new
//! grids, a new graph each time) and prints each run's time.

use std::time::Duration;

use examples::common::BoxError;
use examples::{jacobi, stream_chunks};
use gpu_pipeline::Context;

const REPS: usize = 5;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// One jacobi row: per-sweep medians of the two solvers.
struct JacobiRow {
    size: u32,
    check_every: u32,
    sweeps: u32,
    ours: f64,
    raw: f64,
}

fn jacobi_rows(ctx: &Context) -> Result<Vec<JacobiRow>, BoxError> {
    let mut rows = Vec::new();
    for (size, sweeps) in [(512u32, 4000u32), (4096, 400)] {
        for check_every in [1u32, 20] {
            // Warm-up, and the bit-for-bit agreement of the two solvers.
            let (_, ours_grid) = jacobi::time_sweeps(ctx, size, size, 10, check_every)?;
            let (_, raw_grid) = jacobi::anchor::time_sweeps(ctx, size, size, 10, check_every)?;
            if ours_grid != raw_grid {
                return Err(format!("jacobi {size}: the solvers' grids differ").into());
            }
            let (mut ours, mut raw) = (Vec::new(), Vec::new());
            // Each rep starts with the other solver, so neither always runs first.
            for rep in 0..REPS {
                if rep % 2 == 0 {
                    ours.push(jacobi::time_sweeps(ctx, size, size, sweeps, check_every)?.0);
                    raw.push(jacobi::anchor::time_sweeps(ctx, size, size, sweeps, check_every)?.0);
                } else {
                    raw.push(jacobi::anchor::time_sweeps(ctx, size, size, sweeps, check_every)?.0);
                    ours.push(jacobi::time_sweeps(ctx, size, size, sweeps, check_every)?.0);
                }
            }
            let per = |d: Duration| d.as_secs_f64() / f64::from(sweeps);
            rows.push(JacobiRow {
                size,
                check_every,
                sweeps,
                ours: per(median(ours)),
                raw: per(median(raw)),
            });
        }
    }
    Ok(rows)
}

/// One jacobi-to-tolerance row: the sweeps both loops ran and their per-sweep medians.
struct ToleranceRow {
    size: u32,
    tol: f32,
    max_sweeps: u32,
    sweeps: u32,
    device: f64,
    host: f64,
}

/// Runs of each loop per jacobi-to-tolerance row.
const TOL_REPS: usize = 3;

/// Grid size, tolerance and sweep cap of each row: both converge in about 2420 sweeps (the
/// residual near the lid's corners sets the pace, whatever the grid size); at 4096x4096
/// (about 0.11 ms a sweep on an H100) the cap keeps a row under about 3 s even if it does
/// not converge.
const TOLERANCE_CASES: [(u32, f32, u32); 2] = [(512, 1e-4, 20_000), (4096, 1e-4, 4_000)];

fn tolerance_rows(ctx: &Context) -> Result<Vec<ToleranceRow>, BoxError> {
    let mut rows = Vec::new();
    for (size, tol, max_sweeps) in TOLERANCE_CASES {
        let (mut device, mut host) = (Vec::new(), Vec::new());
        let mut sweeps = 0;
        for rep in 0..TOL_REPS {
            let (d, d_sweeps, d_grid) = jacobi::time_device_loop(ctx, size, size, tol, max_sweeps)?;
            let (h, h_sweeps, h_grid) = jacobi::time_host_loop(ctx, size, size, tol, max_sweeps)?;
            if d_sweeps != h_sweeps {
                return Err(format!(
                    "jacobi {size} to {tol:e}: the device loop ran {d_sweeps} sweeps, the host \
                     loop {h_sweeps}"
                )
                .into());
            }
            if rep == 0 && d_grid != h_grid {
                return Err(
                    format!("jacobi {size} to {tol:e}: the loops' final grids differ").into(),
                );
            }
            sweeps = d_sweeps;
            device.push(d);
            host.push(h);
        }
        let per = |d: Duration| d.as_secs_f64() / f64::from(sweeps);
        rows.push(ToleranceRow {
            size,
            tol,
            max_sweeps,
            sweeps,
            device: per(median(device)),
            host: per(median(host)),
        });
    }
    Ok(rows)
}

/// One stream_chunks row: the best time of `passes` passes and the bytes they move.
struct ChunksRow {
    chunks: u32,
    streams: u32,
    ahead: bool,
    seconds: f64,
    bytes: f64,
}

const ELEMENTS: u32 = 16 << 20;
const PASSES: u32 = 8;

fn chunks_rows(ctx: &Context) -> Result<(f64, Vec<ChunksRow>), BoxError> {
    let limit = stream_chunks::two_way_limit(ctx, ELEMENTS as usize, REPS as u32)?;
    let mut rows = Vec::new();
    for (chunks, streams) in [(8u32, 2u32), (16, 4), (32, 4), (64, 8)] {
        for ahead in [true, false] {
            let best = stream_chunks::time_passes(
                ctx,
                ELEMENTS,
                chunks,
                streams,
                PASSES,
                ahead,
                REPS as u32,
            )?;
            rows.push(ChunksRow {
                chunks,
                streams,
                ahead,
                seconds: best.as_secs_f64(),
                bytes: 2.0 * f64::from(ELEMENTS) * 4.0 * f64::from(PASSES),
            });
        }
    }
    Ok((limit, rows))
}

fn print(
    device: &str,
    jacobi: &[JacobiRow],
    tolerance: &[ToleranceRow],
    limit: f64,
    chunks: &[ChunksRow],
) {
    println!(
        "\n{device}: jacobi per sweep, medians of {REPS}; ours = the example's captured pipeline, raw = raw driver calls, one graph per parity"
    );
    println!("| grid | residual read | sweeps | ours µs/sweep | raw µs/sweep | ours / raw |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    for row in jacobi {
        println!(
            "| {0}x{0} | every {1} | {2} | {3:.2} | {4:.2} | {5:.3} |",
            row.size,
            row.check_every,
            row.sweeps,
            row.ours * 1e6,
            row.raw * 1e6,
            row.ours / row.raw
        );
    }
    for size in [512, 4096] {
        let worst = jacobi
            .iter()
            .filter(|r| r.size == size)
            .map(|r| r.ours / r.raw)
            .fold(0.0, f64::max);
        let verdict = if worst <= 1.0 { "met" } else { "MISSED" };
        println!(
            "target: jacobi {size}x{size} at least as fast per sweep as raw: worst ours/raw = {worst:.3}, {verdict}"
        );
    }
    println!(
        "\n{device}: jacobi to tolerance: device loop vs host loop, per sweep, medians of {TOL_REPS}; device loop = one launch of JacobiConverge (2 sweeps + 1 reduction per WHILE iteration), host loop = JacobiPair (2 sweeps + 1 reduction + the residual copy) replayed, residual read after every launch (as the raw C++ host loop of benches/anchors/jacobi_while.cu)"
    );
    println!(
        "| grid | tolerance | max sweeps | sweeps | device loop µs/sweep | host loop µs/sweep | host / device |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for row in tolerance {
        println!(
            "| {0}x{0} | {1:.0e} | {2} | {3}{4} | {5:.2} | {6:.2} | {7:.2} |",
            row.size,
            row.tol,
            row.max_sweeps,
            row.sweeps,
            if row.sweeps >= row.max_sweeps {
                " (limit)"
            } else {
                ""
            },
            row.device * 1e6,
            row.host * 1e6,
            row.host / row.device
        );
    }
    if let Some(row) = tolerance.iter().find(|r| r.size == 512) {
        let ratio = row.host / row.device;
        let verdict = if ratio >= 2.5 { "met" } else { "MISSED" };
        println!(
            "target: jacobi 512x512 device loop at least 2.5x faster per sweep than the host loop: {ratio:.2}x, {verdict}"
        );
    }
    println!(
        "(the raw C++ WHILE-node loop: nvcc -O3 -arch=sm_90 -o jacobi_while benches/anchors/jacobi_while.cu -lcuda && ./jacobi_while 512 1e-4 20000)"
    );
    println!(
        "\n{device}: stream_chunks over 64 MiB, {PASSES} passes, best of {REPS}; two-way copy limit {:.1} GB/s",
        limit / 1e9
    );
    println!("| chunks | streams | passes | GB/s (in + out) | / two-way limit |");
    println!("| ---: | ---: | --- | ---: | ---: |");
    for row in chunks {
        let gbps = row.bytes / row.seconds;
        println!(
            "| {} | {} | {} | {:.1} | {:.3} |",
            row.chunks,
            row.streams,
            if row.ahead { "running ahead" } else { "closed" },
            gbps / 1e9,
            gbps / limit
        );
    }
    let best = chunks
        .iter()
        .filter(|r| r.ahead)
        .map(|r| r.bytes / r.seconds / limit)
        .fold(0.0, f64::max);
    let verdict = if best >= 0.9 { "met" } else { "MISSED" };
    println!(
        "target: stream_chunks >= 0.9 of the two-way copy limit at 64 MiB: best {best:.3}, {verdict}"
    );
}

fn write_json(
    device: &str,
    jacobi: &[JacobiRow],
    tolerance: &[ToleranceRow],
    limit: f64,
    chunks: &[ChunksRow],
) {
    let jacobi: Vec<String> = jacobi
        .iter()
        .map(|r| {
            format!(
                "{{\"grid\":{},\"check_every\":{},\"ours_us\":{:.4},\"raw_us\":{:.4}}}",
                r.size,
                r.check_every,
                r.ours * 1e6,
                r.raw * 1e6
            )
        })
        .collect();
    let tolerance: Vec<String> = tolerance
        .iter()
        .map(|r| {
            format!(
                "{{\"grid\":{},\"tol\":{:e},\"max_sweeps\":{},\"sweeps\":{},\"device_loop_us\":{:.4},\"host_loop_us\":{:.4}}}",
                r.size,
                r.tol,
                r.max_sweeps,
                r.sweeps,
                r.device * 1e6,
                r.host * 1e6
            )
        })
        .collect();
    let chunks: Vec<String> = chunks
        .iter()
        .map(|r| {
            format!(
                "{{\"chunks\":{},\"streams\":{},\"ahead\":{},\"gbps\":{:.3}}}",
                r.chunks,
                r.streams,
                r.ahead,
                r.bytes / r.seconds / 1e9
            )
        })
        .collect();
    let json = format!(
        "{{\"device\":\"{device}\",\"jacobi\":[{}],\"jacobi_tolerance\":[{}],\"two_way_limit_gbps\":{:.3},\"stream_chunks\":[{}]}}\n",
        jacobi.join(","),
        tolerance.join(","),
        limit / 1e9,
        chunks.join(",")
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    if std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("language.json"), json))
        .is_err()
    {
        eprintln!("could not write target/bench/language.json");
    }
}

/// The pipeline sides on the checked CPU backend at a tiny size.
fn check_host() -> Result<(), BoxError> {
    let ctx = Context::cpu_checked();
    let (_, grid) = jacobi::time_sweeps(&ctx, 40, 24, 30, 7)?;
    let (mut a, mut b) = (jacobi::initial_grid(40, 24), jacobi::initial_grid(40, 24));
    for _ in 0..32 {
        jacobi::reference_sweep(&a, &mut b, 40, 24);
        std::mem::swap(&mut a, &mut b);
    }
    if grid != a {
        return Err("jacobi: the pipeline's grid differs from the CPU's".into());
    }
    // The device loop to a tolerance and at its limit (6 sweeps), against the host loop and
    // the CPU.
    for (tol, max_sweeps) in [(1e-3f32, 2000u32), (1e-9, 6)] {
        let (_, sweeps, grid) = jacobi::time_device_loop(&ctx, 40, 24, tol, max_sweeps)?;
        let (_, host_sweeps, host_grid) = jacobi::time_host_loop(&ctx, 40, 24, tol, max_sweeps)?;
        let (mut a, mut b) = (jacobi::initial_grid(40, 24), jacobi::initial_grid(40, 24));
        let mut residuals = Vec::new();
        for _ in 0..sweeps {
            residuals.push(jacobi::reference_sweep(&a, &mut b, 40, 24));
            std::mem::swap(&mut a, &mut b);
        }
        // Each pair's residual is its second sweep's: above `tol` for every pair but the
        // last, and for the last too when the loop stopped at its limit.
        let pair_residual = |pair: u32| residuals[2 * pair as usize - 1];
        let residual = pair_residual(sweeps / 2);
        let earlier_above = (1..sweeps / 2).all(|pair| pair_residual(pair) > tol);
        let stopped_right = earlier_above
            && match max_sweeps {
                6 => sweeps == 6 && residual > tol,
                _ => sweeps < max_sweeps && residual <= tol,
            };
        if !stopped_right || sweeps != host_sweeps || grid != a || host_grid != a {
            return Err(format!(
                "jacobi to {tol:e}: device loop {sweeps} sweeps, host loop {host_sweeps}, CPU \
                 residual {residual:e}; grids equal to the CPU's: {}, {}",
                grid == a,
                host_grid == a
            )
            .into());
        }
    }
    for ahead in [true, false] {
        stream_chunks::time_passes(&ctx, 1000, 8, 3, 3, ahead, 2)?;
    }
    let races = ctx.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(())
}

/// `--host-cost`: per-sweep medians (and spreads) of the two jacobi solvers' host work, five
/// alternating rounds of `sweeps` sweeps at 512x512 with the residual read after every sweep.
/// The grids are not compared: against a do-nothing driver they are garbage.
fn host_cost(sweeps: u32) -> Result<(), BoxError> {
    let ctx = Context::cuda(0)?;
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for round in 0..5 {
        let mut times = [Duration::ZERO; 2];
        for k in 0..2 {
            // Each round starts with the other solver.
            let which = (k + round) % 2;
            times[which] = if which == 0 {
                jacobi::time_sweeps(&ctx, 512, 512, sweeps, 1)?.0
            } else {
                jacobi::anchor::time_sweeps(&ctx, 512, 512, sweeps, 1)?.0
            };
        }
        ours.push(times[0].as_secs_f64() * 1e6 / f64::from(sweeps));
        raw.push(times[1].as_secs_f64() * 1e6 / f64::from(sweeps));
    }
    let summary = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        format!("{:.3} ({:.3}-{:.3})", v[2], v[0], v[4])
    };
    println!("host work per sweep, jacobi 512x512, residual read every sweep, {sweeps} sweeps,");
    println!("medians of 5 alternating rounds (min-max), in microseconds:");
    println!("  ours {}", summary(ours));
    println!("  raw  {}", summary(raw));
    Ok(())
}

/// `--device-loop-repeat N`: N solves of the 512x512 device loop to 1e-4 in a row, each on
/// new grids with a new graph, and the time of each (to compare with `REPEAT=N` of
/// `benches/anchors/jacobi_while.cu`).
fn device_loop_repeat(runs: u32) -> Result<(), BoxError> {
    let ctx = Context::cuda(0)?;
    for run in 0..runs {
        let (time, sweeps, _) = jacobi::time_device_loop(&ctx, 512, 512, 1e-4, 20_000)?;
        println!(
            "repeat {run} device_while {sweeps} {:.3} {:.3}",
            time.as_secs_f64() * 1e3,
            time.as_secs_f64() * 1e6 / f64::from(sweeps)
        );
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--device-loop-repeat") {
        let runs = args.get(at + 1).and_then(|s| s.parse().ok()).unwrap_or(8);
        if let Err(e) = device_loop_repeat(runs) {
            eprintln!("language device loop repeat failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--host-cost") {
        let sweeps = args
            .get(at + 1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(20_000);
        if let Err(e) = host_cost(sweeps) {
            eprintln!("language host cost failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    if std::env::args().any(|a| a == "--check-host") {
        match check_host() {
            Ok(()) => println!("language: checked CPU backend, results verified, no races"),
            Err(e) => {
                eprintln!("language host check failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("language bench skipped: no CUDA device ({e})");
            return;
        }
    };
    let device = ctx.device().and_then(|d| d.name().ok()).unwrap_or_default();
    let result = jacobi_rows(&ctx)
        .and_then(|j| Ok((j, tolerance_rows(&ctx)?)))
        .and_then(|(j, t)| Ok((j, t, chunks_rows(&ctx)?)));
    match result {
        Ok((jacobi, tolerance, (limit, chunks))) => {
            print(&device, &jacobi, &tolerance, limit, &chunks);
            write_json(&device, &jacobi, &tolerance, limit, &chunks);
        }
        Err(e) => {
            eprintln!("language bench failed: {e}");
            std::process::exit(1);
        }
    }
}
