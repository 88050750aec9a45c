//! Issue 14's comparisons, measured in one run on one GPU.
//!
//! | table | compares |
//! | --- | --- |
//! | jacobi | the `jacobi` example's solver (one captured sweep, `swap_u_u_new` after each replay, the residual read through the window every k sweeps) against the same solver written with raw driver calls and one graph per parity (`examples/src/jacobi/anchor.rs`), per sweep, at 512x512 and 4096x4096, with the residual read after every sweep and every 20th |
//! | stream_chunks | the `stream_chunks` example's passes over 64 MiB (chunks as ranges of one array on a stream array; passes running ahead, and closed) against the two-way copy limit (a host-to-device and a device-to-host copy of the whole array at once, as `tests/benches/overlap.rs` measures it) |
//!
//! Every case runs once to warm up, then `REPS` times (jacobi: the two solvers interleaved);
//! the tables show medians (jacobi) and bests (stream_chunks, whose passes are timed
//! together). The jacobi solvers' final grids must agree bit for bit, and every
//! stream_chunks output is checked against the CPU. Without a GPU it says so and exits
//! successfully; `-- --check-host` runs the pipeline sides on the checked CPU backend at a
//! tiny size and fails on a wrong result or a race.
//!
//! `cargo bench -p examples --bench language`; on the GPU machine `bash .gpu/run bench
//! language` (or the built binary). Results also go to `target/bench/language.json`.

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
            for _ in 0..REPS {
                ours.push(jacobi::time_sweeps(ctx, size, size, sweeps, check_every)?.0);
                raw.push(jacobi::anchor::time_sweeps(ctx, size, size, sweeps, check_every)?.0);
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

fn print(device: &str, jacobi: &[JacobiRow], limit: f64, chunks: &[ChunksRow]) {
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

fn write_json(device: &str, jacobi: &[JacobiRow], limit: f64, chunks: &[ChunksRow]) {
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
        "{{\"device\":\"{device}\",\"jacobi\":[{}],\"two_way_limit_gbps\":{:.3},\"stream_chunks\":[{}]}}\n",
        jacobi.join(","),
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
    for ahead in [true, false] {
        stream_chunks::time_passes(&ctx, 1000, 8, 3, 3, ahead, 2)?;
    }
    let races = ctx.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(())
}

fn main() {
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
    let result = jacobi_rows(&ctx).and_then(|j| Ok((j, chunks_rows(&ctx)?)));
    match result {
        Ok((jacobi, (limit, chunks))) => {
            print(&device, &jacobi, limit, &chunks);
            write_json(&device, &jacobi, limit, &chunks);
        }
        Err(e) => {
            eprintln!("language bench failed: {e}");
            std::process::exit(1);
        }
    }
}
