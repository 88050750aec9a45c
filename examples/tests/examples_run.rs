//! Every example at a small size on the checked CPU backend: its own checks pass and the
//! race detector reports nothing. Plus the flag parsing each `main` relies on, and the
//! example programs themselves run as a user runs them (`--help`, `--dot`, misuse: exit code
//! and message).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::Parser;
use examples::cg::{self, CgArgs};
use examples::common::Report;
use examples::cublas::{self, CublasArgs};
use examples::halo::{self, HaloArgs};
use examples::heat2d::{self, Heat2dArgs, HeatStep};
use examples::interop::{self, InteropArgs};
use examples::jacobi::{self, JacobiArgs};
use examples::jacobi_multi::{self, JacobiMultiArgs, JacobiStep};
use examples::nbody::{self, NbodyArgs};
use examples::overlap::{self, OverlapArgs};
use examples::stream_chunks::{self, StreamChunksArgs};
use gpu_pipeline::Context;

const EXAMPLES: [&str; 9] = [
    "heat2d",
    "nbody",
    "overlap",
    "interop",
    "cublas",
    "jacobi_multi",
    "jacobi",
    "stream_chunks",
    "halo",
];

/// A small run of each example, for the tests that need one to reach the end.
fn small_run(name: &str) -> &'static [&'static str] {
    match name {
        "heat2d" => &["--nx", "16", "--ny", "12", "--steps", "4", "-q"],
        "nbody" => &[
            "--bodies",
            "16",
            "--steps",
            "3",
            "--reference-steps",
            "2",
            "-q",
        ],
        "overlap" => &[
            "--elements",
            "64",
            "--chunks",
            "4",
            "--iters",
            "2",
            "--repeats",
            "1",
            "-q",
        ],
        "cublas" => &["--m", "9", "--n", "7", "--k", "5", "--replays", "2", "-q"],
        "jacobi_multi" => &[
            "--nx",
            "16",
            "--ny",
            "14",
            "--iterations",
            "4",
            "--ranks",
            "2",
            "-q",
        ],
        "jacobi" => &["--nx", "12", "--ny", "10", "--tol", "1e-3", "-q"],
        "stream_chunks" => &[
            "--elements",
            "100",
            "--chunks",
            "7",
            "--streams",
            "3",
            "--passes",
            "2",
            "--repeats",
            "1",
            "-q",
        ],
        "halo" => &["--nx", "16", "--ny", "9", "--steps", "5", "-q"],
        _ => &["--elements", "16"],
    }
}

/// The example program `name`, built beside this test binary (`cargo test` builds the
/// examples; the GPU bundle keeps the same layout), forced onto the CPU backend.
fn example(name: &str) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary sits two folders deep")
        .join("examples");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is missing: build the examples first (`cargo test` does; else `cargo build -p \
         examples --examples`)",
        path.display()
    );
    let mut command = Command::new(path);
    command.env("GPU_PIPELINE_BACKEND", "cpu");
    command
}

/// Whether this runs under NVIDIA's compute-sanitizer (`bash .gpu/run sanitize`), which
/// would also instrument the example processes the CLI tests start; those never call CUDA
/// (they run on the CPU backend), which the sanitizer counts as an error. The CLI tests
/// ran in the normal run.
fn under_compute_sanitizer() -> bool {
    let skip = std::env::var_os("NVTX_INJECTION64_PATH")
        .is_some_and(|path| path.to_string_lossy().contains("sanitizer"));
    if skip {
        println!("skipped under compute-sanitizer: it starts example processes on the CPU backend");
    }
    skip
}

fn run_example(name: &str, args: &[&str]) -> Output {
    example(name)
        .args(args)
        .output()
        .expect("the example starts")
}

/// Asserts the exit code and that stderr holds `message`; returns stdout and stderr.
fn assert_exit(output: &Output, code: i32, message: &str) -> (String, String) {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains(message),
        "expected {message:?} in stderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// A fresh folder for one test's files.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("examples-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn assert_passed(ctx: &Context, report: &Report) {
    assert!(report.passed(), "{report}");
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
    assert!(report.checks.iter().any(|c| c.name == "race detector"));
}

#[test]
fn heat2d_cpu_checked_matches_the_reference_and_conserves_heat() {
    let dir = scratch("heat2d-png");
    let png = dir.join("field.png");
    let args = Heat2dArgs::parse_from([
        "heat2d",
        "--nx",
        "24",
        "--ny",
        "17",
        "--steps",
        "40",
        "--phases",
        "3",
        "--quiet",
        "--png",
        png.to_str().unwrap(),
    ]);
    let ctx = Context::cpu_checked();
    let outcome = heat2d::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(outcome.full_reference);
    assert_eq!(outcome.phase_heat.len(), 3);
    assert_eq!(outcome.field.len(), 24 * 17);
    assert!(outcome.achieved_bandwidth > 0.0 && outcome.achieved_bandwidth.is_finite());
    assert!(outcome.copy_bandwidth > 0.0 && outcome.copy_bandwidth.is_finite());
    assert_eq!(outcome.report.outputs, std::slice::from_ref(&png));
    // The PNG is there and has the grid's size.
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 24);
    assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 17);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn heat2d_schedule_doubles_alpha_and_covers_every_step() {
    let args =
        Heat2dArgs::parse_from(["heat2d", "--steps", "22", "--phases", "3", "--alpha", "0.2"]);
    let phases = heat2d::schedule(&args);
    assert_eq!(phases.iter().map(|p| p.replays).sum::<u32>(), 11);
    assert_eq!(
        phases.iter().map(|p| p.alpha).collect::<Vec<_>>(),
        [0.05, 0.1, 0.2]
    );
}

#[test]
fn heat2d_rejects_bad_flags_with_a_reason() {
    for bad in [
        &["heat2d", "--alpha", "0.3"][..],
        &["heat2d", "--alpha", "nan"],
        &["heat2d", "--nx", "1"],
        &["heat2d", "--no-png", "--png", "x.png"],
        &["heat2d", "--frobnicate"],
    ] {
        let err = Heat2dArgs::try_parse_from(bad).unwrap_err();
        assert!(!err.to_string().is_empty());
    }
    let err = Heat2dArgs::try_parse_from(["heat2d", "--alpha", "0.3"]).unwrap_err();
    assert!(err.to_string().contains("unstable"), "{err}");
    let odd = Heat2dArgs::parse_from(["heat2d", "--steps", "7", "--no-png"]);
    assert!(odd.validate().unwrap_err().contains("odd"));
}

#[test]
fn heat2d_dot_names_every_stage() {
    for stage in ["forward", "save", "back"] {
        assert!(HeatStep::DOT.contains(stage), "{}", HeatStep::DOT);
    }
    assert_eq!(HeatStep::STAGES, ["forward", "save", "back"]);
}

#[test]
fn nbody_cpu_checked_conserves_momentum_and_matches_the_reference() {
    let args = NbodyArgs::parse_from([
        "nbody",
        "--bodies",
        "40",
        "--steps",
        "12",
        "--sample-every",
        "5",
        "--reference-steps",
        "7",
        "--quiet",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = nbody::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    let steps: Vec<u32> = outcome.samples.iter().map(|s| s.0).collect();
    assert_eq!(steps, [5, 7, 10, 12]);
    assert!(outcome.samples.iter().all(|s| s.1.len() == 4 * 40));
}

#[test]
fn nbody_rejects_a_reference_longer_than_the_run() {
    let args = NbodyArgs::parse_from(["nbody", "--steps", "3", "--reference-steps", "5"]);
    let err = nbody::run(&Context::cpu(), &args).unwrap_err();
    assert!(err.to_string().contains("--reference-steps"), "{err}");
}

#[test]
fn overlap_cpu_checked_matches_the_reference() {
    let args = OverlapArgs::parse_from([
        "overlap",
        "--elements",
        "3000",
        "--chunks",
        "5",
        "--iters",
        "4",
        "--repeats",
        "1",
        "--quiet",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = overlap::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
}

#[test]
fn overlap_with_one_chunk_still_runs_every_stage() {
    let args = OverlapArgs::parse_from([
        "overlap",
        "--elements",
        "100",
        "--chunks",
        "1",
        "--iters",
        "2",
        "--repeats",
        "1",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = overlap::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
}

#[test]
fn overlap_rejects_elements_that_do_not_split_into_chunks() {
    let args = OverlapArgs::parse_from(["overlap", "--elements", "10", "--chunks", "3"]);
    let err = overlap::run(&Context::cpu(), &args).unwrap_err();
    assert!(err.to_string().contains("multiple"), "{err}");
}

#[test]
fn jacobi_cpu_checked_converges_and_matches_the_reference_bit_for_bit() {
    let args = JacobiArgs::parse_from([
        "jacobi", "--nx", "20", "--ny", "14", "--tol", "1e-4", "--quiet",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = jacobi::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(outcome.full_reference);
    assert!(outcome.residual < 1e-4, "{}", outcome.residual);
    assert!(outcome.iterations > 10, "{}", outcome.iterations);
    // Hot lid on top, cold walls: the first interior row is the warmest.
    let row = |y: usize| outcome.grid[y * 20 + 10];
    assert!(
        row(1) > row(7) && row(7) > row(12),
        "{:?}",
        &outcome.grid[..40]
    );
}

#[test]
fn jacobi_stops_at_max_iters_and_checks_the_residual_every_k_sweeps() {
    let args = JacobiArgs::parse_from([
        "jacobi",
        "--nx",
        "16",
        "--ny",
        "16",
        "--tol",
        "1e-9",
        "--max-iters",
        "25",
        "--check-every",
        "10",
        "--reference",
        "bounded",
        "-q",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = jacobi::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert_eq!(outcome.iterations, 25);
    assert!(!outcome.full_reference);
}

/// `--device-loop`: the solve as one launch of a device `while` loop (two sweeps per
/// iteration) reaches the tolerance at the host loop's sweep rounded up to a pair, with the
/// same grid bit for bit, checked against the full CPU reference; `--trace` still profiles a
/// sweep.
#[test]
fn jacobi_device_loop_cpu_checked_converges_like_the_host_loop() {
    let dir = scratch("jacobi-device-loop");
    let trace = dir.join("trace.json");
    let flags = ["jacobi", "--nx", "20", "--ny", "14", "--tol", "1e-4", "-q"];
    let ctx = Context::cpu_checked();
    let host = jacobi::run(&ctx, &JacobiArgs::parse_from(flags)).unwrap();
    let mut device_flags = flags.to_vec();
    device_flags.extend(["--device-loop", "--trace", trace.to_str().unwrap()]);
    let device = jacobi::run(&ctx, &JacobiArgs::parse_from(device_flags)).unwrap();
    assert_passed(&ctx, &device.report);
    assert!(device.full_reference);
    assert!(device.residual <= 1e-4, "{}", device.residual);
    assert_eq!(device.iterations, host.iterations.next_multiple_of(2));
    if device.iterations == host.iterations {
        assert_eq!(device.grid, host.grid);
    }
    assert!(
        device
            .report
            .checks
            .iter()
            .any(|c| c.name == "every residual read (1) vs the CPU's"),
        "{}",
        device.report
    );
    let sweeps = device
        .report
        .timings
        .rows()
        .iter()
        .find(|r| r.0 == "sweeps");
    assert!(
        sweeps.is_some_and(|r| r.2.contains("in one launch")),
        "{}",
        device.report
    );
    assert!(
        !device
            .report
            .notes
            .iter()
            .any(|n| n.contains("not reached")),
        "{}",
        device.report
    );
    assert_eq!(device.report.outputs, std::slice::from_ref(&trace));
    std::fs::remove_dir_all(&dir).ok();
}

/// A device loop that stops at `--max-iters` (7 sweeps: 4 pairs) is no failure: the run
/// says the tolerance was not reached, and its grids pass every check.
#[test]
fn jacobi_device_loop_at_max_iters_notes_not_reached_and_passes() {
    let args = JacobiArgs::parse_from([
        "jacobi",
        "--nx",
        "16",
        "--ny",
        "12",
        "--tol",
        "1e-9",
        "--max-iters",
        "7",
        "--device-loop",
        "-q",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = jacobi::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(outcome.full_reference);
    assert_eq!(outcome.iterations, 8);
    assert!(outcome.residual > 1e-9, "{}", outcome.residual);
    assert!(
        outcome
            .report
            .notes
            .iter()
            .any(|n| n.contains("after 8 sweeps") && n.contains("not reached: raise --max-iters")),
        "{}",
        outcome.report
    );
}

#[test]
fn jacobi_device_loop_rejects_check_every() {
    let args = JacobiArgs::parse_from(["jacobi", "--device-loop", "--check-every", "5"]);
    let err = args.validate().unwrap_err();
    assert!(
        err.contains("`--check-every 5` does not apply with `--device-loop`"),
        "{err}"
    );
    assert!(jacobi::run(&Context::cpu(), &args).is_err());
    // The default (or an explicit 1) is fine.
    let args = JacobiArgs::parse_from(["jacobi", "--device-loop", "--check-every", "1"]);
    assert!(args.validate().is_ok());
    if under_compute_sanitizer() {
        return;
    }
    let output = run_example("jacobi", &["--device-loop", "--check-every", "5"]);
    let (stdout, _) = assert_exit(&output, 2, "does not apply with `--device-loop`");
    assert!(stdout.is_empty(), "{stdout}");
}

#[test]
fn stream_chunks_cpu_checked_runs_ahead_and_matches_the_reference() {
    for (elements, chunks, streams) in [("1000", "8", "3"), ("37", "37", "1"), ("9", "4", "4")] {
        let args = StreamChunksArgs::parse_from([
            "stream_chunks",
            "--elements",
            elements,
            "--chunks",
            chunks,
            "--streams",
            streams,
            "--passes",
            "3",
            "--repeats",
            "1",
            "-q",
        ]);
        let ctx = Context::cpu_checked();
        let outcome = stream_chunks::run(&ctx, &args).unwrap();
        assert_passed(&ctx, &outcome.report);
        assert!(outcome.two_way_limit > 0.0 && outcome.achieved > 0.0);
    }
}

#[test]
fn stream_chunks_rejects_more_chunks_than_elements() {
    let args = StreamChunksArgs::parse_from(["stream_chunks", "--elements", "3", "--chunks", "4"]);
    let err = stream_chunks::run(&Context::cpu(), &args).unwrap_err();
    assert!(err.to_string().contains("fewer than --chunks"), "{err}");
}

#[test]
fn halo_cpu_checked_streams_ghost_rows_and_matches_the_reference() {
    let args = HaloArgs::parse_from(["halo", "--nx", "23", "--ny", "11", "--steps", "12", "-q"]);
    let ctx = Context::cpu_checked();
    let outcome = halo::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(outcome.full_reference);
    assert_eq!(outcome.band.len(), 23 * 11);
    assert_eq!(outcome.edges.len(), 2 * 23);
    // The warm top edge has heated the first row above the bottom one.
    let first: f32 = outcome.band[..23].iter().sum();
    let last: f32 = outcome.band[10 * 23..].iter().sum();
    assert!(first > last, "{first} {last}");
}

#[test]
fn interop_cpu_checked_runs_the_library_call_and_skips_raw_handles() {
    let args = InteropArgs::parse_from(["interop", "--elements", "1000"]);
    let ctx = Context::cpu_checked();
    let outcome = interop::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(!outcome.borrowed_foreign_stream);
}

/// `jacobi_multi` on 2 and 4 simulated ranks (checked): every rank's block equals the same
/// grid solved by one rank and by a plain CPU solver, and the race detector finds nothing.
#[test]
fn jacobi_multi_on_two_and_four_ranks_matches_one_rank_and_the_cpu_solver() {
    for ranks in [2, 4] {
        let args = JacobiMultiArgs::parse_from([
            "jacobi_multi",
            "--nx",
            "37",
            "--ny",
            "30",
            "--iterations",
            "12",
            "-q",
        ]);
        let outcomes = jacobi_multi::run_cpu_ranks(&args, ranks, true).unwrap();
        assert_ranks_match_one_rank(&outcomes, ranks, 37, 28);
    }
}

/// What every multi-rank run of `jacobi_multi` on simulated ranks must show: `ranks`
/// outcomes, each passing its checks, among them the comparisons with one rank and the CPU
/// solver and the race detector; blocks (rows `nx` wide) that cover the `interior` rows once;
/// one residual on every rank.
fn assert_ranks_match_one_rank(
    outcomes: &[jacobi_multi::RankOutcome],
    ranks: usize,
    nx: usize,
    interior: usize,
) {
    assert_eq!(outcomes.len(), ranks);
    let mut rows = 0;
    for outcome in outcomes {
        assert_eq!(outcome.ranks, ranks);
        assert!(
            outcome.report.passed(),
            "{ranks} ranks, rank {}: {}",
            outcome.rank,
            outcome.report
        );
        let names: Vec<&str> = outcome
            .report
            .checks
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        for wanted in [
            "vs the same grid on one rank",
            "vs a CPU solver",
            "race detector",
        ] {
            assert!(names.iter().any(|n| n.contains(wanted)), "{names:?}");
        }
        assert!(outcome.single.is_some());
        rows += outcome.solved.block.len() / nx;
    }
    assert_eq!(
        rows, interior,
        "the ranks' blocks cover every interior row once"
    );
    let residual = outcomes[0].solved.residual;
    assert!(outcomes.iter().all(|o| o.solved.residual == residual));
}

/// `jacobi_multi --exchange onesided` on 2, 3 and 4 simulated ranks (checked): each rank's
/// kernel stores its edge rows into its neighbours' windows; every rank's block equals the
/// same grid solved by one rank (the `nccl` step) bit for bit and the CPU solver, and the race
/// detector, which sees every rank, finds nothing.
#[test]
fn jacobi_multi_onesided_exchange_on_two_three_and_four_ranks_matches_one_rank() {
    let args = JacobiMultiArgs::parse_from([
        "jacobi_multi",
        "--exchange",
        "onesided",
        "--nx",
        "37",
        "--ny",
        "30",
        "--iterations",
        "12",
        "-q",
    ]);
    for ranks in [2, 3, 4] {
        let outcomes = jacobi_multi::run_cpu_ranks(&args, ranks, true).unwrap();
        assert_ranks_match_one_rank(&outcomes, ranks, 37, 28);
    }
}

/// `jacobi_multi --exchange peer` on 1, 2 and 4 simulated devices of one process (checked):
/// each kernel stores its edge rows into its neighbours' halos; the whole grid equals the
/// same kernels on one device bit for bit and the CPU solver, and the race detector finds
/// nothing. 3 devices are refused (a device array's length is a constant).
#[test]
fn jacobi_multi_peer_exchange_on_one_two_and_four_devices_matches_the_cpu_solver() {
    let args = JacobiMultiArgs::parse_from([
        "jacobi_multi",
        "--exchange",
        "peer",
        "--nx",
        "37",
        "--ny",
        "30",
        "--iterations",
        "12",
        "-q",
    ]);
    let mut residuals = Vec::new();
    for devices in [1, 2, 4] {
        let contexts = gpu_pipeline::Context::cpu_checked_devices(devices);
        let outcome = jacobi_multi::run_peer(&contexts, &args).unwrap();
        assert!(
            outcome.report.passed(),
            "{devices} devices: {}",
            outcome.report
        );
        let names: Vec<&str> = outcome
            .report
            .checks
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        for wanted in [
            "vs the same grid on one device",
            "vs a CPU solver",
            "race detector",
        ] {
            assert!(names.iter().any(|n| n.contains(wanted)), "{names:?}");
        }
        assert_eq!(
            outcome.solved.block.len(),
            37 * 28,
            "every interior row once"
        );
        residuals.push(outcome.solved.residual);
    }
    assert!(
        residuals
            .windows(2)
            .all(|w| (w[0] - w[1]).abs() <= 1e-6 * w[0]),
        "{residuals:?}"
    );
    let three = JacobiMultiArgs::parse_from([
        "jacobi_multi",
        "--exchange",
        "peer",
        "--ranks",
        "3",
        "--ny",
        "30",
    ]);
    assert!(three.validate().unwrap_err().contains("[1, 2, 4, 8]"));
}

/// `jacobi_multi --exchange peer` on two GPUs of one process: the kernels store their edge
/// rows into the other GPU's halos (peer access); checked against one GPU and the CPU
/// solver. Skips on fewer than two GPUs.
#[test]
#[ignore = "needs two CUDA GPUs"]
fn jacobi_multi_peer_exchange_on_two_gpus() {
    let count = gpu_pipeline::Device::count().unwrap_or(0);
    if count < 2 {
        return println!("skipped: {count} GPU(s), this test needs two");
    }
    let args = JacobiMultiArgs::parse_from([
        "jacobi_multi",
        "--exchange",
        "peer",
        "--nx",
        "1024",
        "--ny",
        "1026",
        "--iterations",
        "100",
        "-q",
    ]);
    let devices: Vec<_> = (0..2)
        .map(|d| gpu_pipeline::Context::cuda(d).unwrap())
        .collect();
    let outcome = jacobi_multi::run_peer(&devices, &args).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    println!("{}", outcome.report);
}

#[test]
fn jacobi_multi_rejects_odd_iterations_and_too_few_rows() {
    let odd = JacobiMultiArgs::parse_from(["jacobi_multi", "--iterations", "7"]);
    assert!(odd.validate().unwrap_err().contains("odd"));
    let thin = JacobiMultiArgs::parse_from(["jacobi_multi", "--ny", "12", "--ranks", "4"]);
    assert!(
        thin.validate().unwrap_err().contains("fewer than 3"),
        "{:?}",
        thin.validate()
    );
    // Without --ranks the count is known only when the ranks start.
    let args = JacobiMultiArgs::parse_from(["jacobi_multi", "--ny", "12", "-q"]);
    let err = jacobi_multi::run_cpu_ranks(&args, 4, false).unwrap_err();
    assert!(err.to_string().contains("fewer than 3"), "{err}");
    assert!(JacobiMultiArgs::try_parse_from(["jacobi_multi", "--nx", "2"]).is_err());
    for stage in [
        "reduce",
        "edges_ab",
        "exchange_b",
        "bulk_ab",
        "exchange_a",
        "bulk_ba",
    ] {
        assert!(JacobiStep::DOT.contains(stage), "{}", JacobiStep::DOT);
    }
}

#[test]
fn cublas_cpu_checked_runs_the_step_with_the_naive_kernel() {
    let args = CublasArgs::parse_from([
        "cublas",
        "--m",
        "33",
        "--n",
        "17",
        "--k",
        "20",
        "--replays",
        "4",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = cublas::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(!outcome.used_cublas);
    assert!(
        outcome
            .cublas_missing
            .is_some_and(|why| why.contains("CPU backend"))
    );
}

#[test]
fn heat2d_bounded_reference_checks_the_last_step_and_the_preview() {
    let args = Heat2dArgs::parse_from([
        "heat2d",
        "--nx",
        "33",
        "--ny",
        "20",
        "--steps",
        "10",
        "--preview-stride",
        "3",
        "--reference",
        "bounded",
        "--no-png",
        "-q",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = heat2d::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(!outcome.full_reference);
    let names: Vec<&str> = outcome
        .report
        .checks
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("last step")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n.starts_with("preview")), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("final field")),
        "{names:?}"
    );
}

#[test]
fn nbody_samples_the_forces_when_the_replay_is_skipped() {
    let args = NbodyArgs::parse_from([
        "nbody",
        "--bodies",
        "300",
        "--steps",
        "4",
        "--reference",
        "bounded",
        "-q",
    ]);
    let ctx = Context::cpu_checked();
    let outcome = nbody::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(!outcome.full_reference);
    assert!(outcome.anchor.is_none());
    assert!(
        outcome
            .report
            .checks
            .iter()
            .any(|c| c.name == "accelerations of 256 sampled bodies vs an f64 CPU sum")
    );
}

#[test]
fn nbody_force_check_catches_a_wrong_force() {
    let bodies = nbody::initial_bodies(64, 1);
    let eps2 = 0.0025;
    let mut acc = nbody::accelerations(&bodies.pos, eps2);
    let sample = nbody::sample_bodies(64);
    let good = nbody::sampled_acceleration_error(&bodies.pos, &acc, eps2, &sample);
    assert!(good < 1e-5, "{good}");
    acc[4 * 10] *= 1.001;
    let bad = nbody::sampled_acceleration_error(&bodies.pos, &acc, eps2, &sample);
    assert!(bad > 1e-5, "{bad}");
}

#[test]
fn every_example_prints_help_with_dot_and_trace() {
    if under_compute_sanitizer() {
        return;
    }
    for name in EXAMPLES {
        let output = run_example(name, &["--help"]);
        let (stdout, _) = assert_exit(&output, 0, "");
        for flag in ["Usage:", "--dot", "--trace <PATH>", "--help"] {
            assert!(
                stdout.contains(flag),
                "{name} --help lacks {flag}:\n{stdout}"
            );
        }
    }
}

#[test]
fn every_example_prints_its_stage_graph_with_dot() {
    if under_compute_sanitizer() {
        return;
    }
    for (name, pipeline) in [
        ("heat2d", "digraph HeatStep"),
        ("nbody", "digraph NbodyStep"),
        ("overlap", "digraph OverlapStep"),
        ("interop", "digraph Interop"),
        ("cublas", "digraph GemmStep"),
        ("jacobi_multi", "digraph JacobiStep"),
        ("jacobi", "digraph JacobiStep"),
        ("stream_chunks", "digraph ChunkPass"),
        ("halo", "digraph HaloStep"),
    ] {
        let output = run_example(name, &["--dot"]);
        let (stdout, _) = assert_exit(&output, 0, "");
        assert!(stdout.contains(pipeline), "{name} --dot:\n{stdout}");
        // Nothing ran: no backend banner, no report.
        assert!(!stdout.contains(" on cpu"), "{name} --dot ran:\n{stdout}");
    }
    let output = run_example("overlap", &["--dot"]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("digraph SerialChunk"));
    let output = run_example("jacobi", &["--dot", "--device-loop"]);
    let (stdout, _) = assert_exit(&output, 0, "");
    assert!(stdout.contains("digraph JacobiConverge"), "{stdout}");
}

#[test]
fn non_finite_floats_are_rejected_before_anything_runs() {
    if under_compute_sanitizer() {
        return;
    }
    for (name, args, message) in [
        (
            "nbody",
            &["--dt", "nan"][..],
            "invalid value 'nan' for '--dt <DT>': nan is not a finite number",
        ),
        ("nbody", &["--eps", "inf"], "inf is not a finite number"),
        ("nbody", &["--dt", "0"], "0 is not in (0, 1]"),
        ("nbody", &["--dt", "fast"], "`fast` is not a number"),
        ("heat2d", &["--alpha", "nan"], "nan is not a finite number"),
        (
            "heat2d",
            &["--alpha", "0.5"],
            "0.5 is not in (0, 0.25]; the explicit scheme is unstable",
        ),
    ] {
        let start = std::time::Instant::now();
        let output = run_example(name, args);
        let (stdout, _) = assert_exit(&output, 2, message);
        assert!(stdout.is_empty(), "{name} {args:?} printed:\n{stdout}");
        assert!(
            start.elapsed().as_secs_f64() < 1.0,
            "{name} {args:?} was slow"
        );
    }
}

#[test]
fn negative_numbers_get_clap_range_messages() {
    if under_compute_sanitizer() {
        return;
    }
    for (name, args, message) in [
        (
            "heat2d",
            &["--steps", "-4"][..],
            "invalid value '-4' for '--steps <STEPS>': -4 is not in 2..=4294967295",
        ),
        ("heat2d", &["--nx", "-1"], "-1 is not in 2..=16384"),
        ("heat2d", &["--alpha", "-0.1"], "-0.1 is not in (0, 0.25]"),
        ("nbody", &["--bodies", "-5"], "-5 is not in 2..=1000000"),
        (
            "nbody",
            &["--reference-steps", "-1"],
            "-1 is not in 0..=4294967295",
        ),
        ("nbody", &["--dt", "-1e-3"], "-0.001 is not in (0, 1]"),
        ("overlap", &["--iters", "-1"], "-1 is not in 0..=1000000"),
        ("overlap", &["--chunks", "-2"], "-2 is not in 1..=4096"),
        (
            "interop",
            &["--elements", "-3"],
            "-3 is not in 1..=4294967295",
        ),
        ("cublas", &["--k", "-8"], "-8 is not in 1..=8192"),
    ] {
        assert_exit(&run_example(name, args), 2, message);
    }
}

#[test]
fn output_paths_are_checked_before_the_run() {
    if under_compute_sanitizer() {
        return;
    }
    let dir = scratch("paths");
    let missing = dir.join("no-such-folder").join("out.json");
    let missing = missing.to_str().unwrap();
    for name in EXAMPLES {
        let output = run_example(name, &["--trace", missing]);
        let (stdout, _) = assert_exit(&output, 2, "`--trace ");
        assert_exit(&output, 2, "cannot write there");
        assert!(!stdout.contains(" on cpu"), "{name} ran:\n{stdout}");
    }
    let output = run_example("heat2d", &["--png", missing]);
    assert_exit(&output, 2, "`--png ");
    let output = run_example("heat2d", &["--png", dir.to_str().unwrap()]);
    assert_exit(&output, 2, "is a directory");
    // The probe leaves nothing behind.
    let probe = dir.join("fresh.json");
    examples::common::check_output_path("--trace", &probe).unwrap();
    assert!(!probe.exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_failed_write_fails_the_run() {
    if under_compute_sanitizer() {
        return;
    }
    if !Path::new("/dev/full").exists() {
        println!("skipped: no /dev/full on this system");
        return;
    }
    let mut cases: Vec<(&str, Vec<&str>)> = EXAMPLES
        .iter()
        .map(|&name| {
            let mut args = small_run(name).to_vec();
            args.extend(["--trace", "/dev/full"]);
            if name == "heat2d" {
                args.push("--no-png");
            }
            (name, args)
        })
        .collect();
    let mut png = small_run("heat2d").to_vec();
    png.extend(["--png", "/dev/full"]);
    cases.push(("heat2d", png));
    for (name, args) in cases {
        let output = run_example(name, &args);
        let (stdout, stderr) = assert_exit(&output, 1, "error: cannot write /dev/full");
        assert!(stderr.contains("No space left on device"), "{stderr}");
        assert!(
            !stdout.contains("wrote"),
            "{name} {args:?} claims a write:\n{stdout}"
        );
    }
}

#[test]
fn every_example_writes_a_trace_and_lists_it() {
    if under_compute_sanitizer() {
        return;
    }
    let dir = scratch("traces");
    for name in EXAMPLES {
        let trace = dir.join(format!("{name}.json"));
        let mut args = small_run(name).to_vec();
        args.extend(["--trace", trace.to_str().unwrap()]);
        if name == "heat2d" {
            args.push("--no-png");
        }
        let output = run_example(name, &args);
        let (stdout, _) = assert_exit(&output, 0, "");
        assert!(
            stdout.contains(&format!("wrote {}", trace.display())),
            "{stdout}"
        );
        assert!(stdout.contains("all checks passed on cpu"), "{stdout}");
        let json = std::fs::read_to_string(&trace).unwrap();
        assert!(json.starts_with("{\"traceEvents\":["), "{json}");
        assert!(json.contains("\"ph\":\"X\""), "{name}: no stage in\n{json}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_example_passes_on_a_gpu() {
    let ctx = Context::cuda(0).unwrap();
    let heat = Heat2dArgs::parse_from([
        "heat2d", "--nx", "300", "--ny", "200", "--steps", "200", "--no-png", "-q",
    ]);
    let outcome = heat2d::run(&ctx, &heat).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    assert!(outcome.full_reference);
    let nb = NbodyArgs::parse_from([
        "nbody",
        "--bodies",
        "1000",
        "--steps",
        "50",
        "--no-anchor",
        "-q",
    ]);
    let outcome = nbody::run(&ctx, &nb).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    assert!(outcome.full_reference);
    let ov = OverlapArgs::parse_from(["overlap", "--elements", "1048576", "--chunks", "8", "-q"]);
    assert!(overlap::run(&ctx, &ov).unwrap().report.passed());
    let io = interop::run(&ctx, &InteropArgs::parse_from(["interop"])).unwrap();
    assert!(io.report.passed() && io.borrowed_foreign_stream);
    let jc = JacobiArgs::parse_from(["jacobi", "--nx", "256", "--ny", "256", "-q"]);
    let outcome = jacobi::run(&ctx, &jc).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    assert!(outcome.full_reference);
    let sc = StreamChunksArgs::parse_from(["stream_chunks", "--elements", "1048577", "-q"]);
    let outcome = stream_chunks::run(&ctx, &sc).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    let ha = HaloArgs::parse_from(["halo", "--nx", "300", "--ny", "200", "--steps", "100", "-q"]);
    let outcome = halo::run(&ctx, &ha).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    assert!(outcome.full_reference);
}

/// `jacobi --device-loop` on a GPU: the solve as one launch with a conditional WHILE node
/// converges at 512x512 in the CPU solver's sweeps (full reference, bit for bit); a loop that
/// stops at `--max-iters` notes it and passes; and the benchmark's two loops agree on the
/// sweep count and the grid.
#[test]
#[ignore = "needs a CUDA GPU"]
fn jacobi_device_loop_passes_on_a_gpu() {
    let ctx = Context::cuda(0).unwrap();
    let args = JacobiArgs::parse_from([
        "jacobi",
        "--nx",
        "512",
        "--ny",
        "512",
        "--tol",
        "1e-4",
        "--device-loop",
        "-q",
    ]);
    let outcome = jacobi::run(&ctx, &args).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    assert!(outcome.full_reference);
    assert!(outcome.residual <= 1e-4, "{}", outcome.residual);
    println!("{}", outcome.report);
    let args = JacobiArgs::parse_from([
        "jacobi",
        "--nx",
        "256",
        "--ny",
        "256",
        "--tol",
        "1e-9",
        "--max-iters",
        "9",
        "--device-loop",
        "-q",
    ]);
    let outcome = jacobi::run(&ctx, &args).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    assert_eq!(outcome.iterations, 10);
    assert!(
        outcome
            .report
            .notes
            .iter()
            .any(|n| n.contains("not reached")),
        "{}",
        outcome.report
    );
    let (_, device_sweeps, device_grid) =
        jacobi::time_device_loop(&ctx, 256, 256, 1e-4, 20_000).unwrap();
    let (_, host_sweeps, host_grid) = jacobi::time_host_loop(&ctx, 256, 256, 1e-4, 20_000).unwrap();
    assert_eq!(device_sweeps, host_sweeps);
    assert!(device_grid == host_grid, "the loops' grids differ");
    assert!(
        device_sweeps > 100 && device_sweeps < 20_000,
        "{device_sweeps}"
    );
}

/// cuBLAS through cudarc in a captured step, between two of our kernels, replayed with both
/// kernels' scalars set in place, against a CPU reference. cuBLAS is loaded at run time;
/// without it the test says so and checks the naive kernel instead.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cublas_in_a_captured_step_matches_the_reference() {
    let ctx = Context::cuda(0).unwrap();
    let args = CublasArgs::parse_from([
        "cublas",
        "--m",
        "192",
        "--n",
        "160",
        "--k",
        "96",
        "--replays",
        "10",
    ]);
    let outcome = cublas::run(&ctx, &args).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    match &outcome.cublas_missing {
        None => assert!(outcome.used_cublas),
        Some(why) => println!("SKIPPED the cuBLAS part: {why} (the naive kernel passed)"),
    }
}

/// `jacobi_multi` as one rank on GPU 0 (no launcher variables: a one-rank NCCL
/// communicator): the halo exchange with itself and the residual's all-reduce inside the
/// replayed graph, checked against the single-rank run and the CPU solver.
#[test]
#[ignore = "needs a CUDA GPU"]
fn jacobi_multi_runs_as_one_rank_on_a_gpu() {
    match gpu_pipeline::nccl::version() {
        Ok(version) => println!("NCCL {version}"),
        Err(e) => return println!("skipped: {e}"),
    }
    let args = JacobiMultiArgs::parse_from([
        "jacobi_multi",
        "--nx",
        "1024",
        "--ny",
        "1024",
        "--iterations",
        "100",
        "-q",
    ]);
    let outcome = jacobi_multi::run_cuda_rank(&args).unwrap();
    assert!(outcome.report.passed(), "{}", outcome.report);
    println!("{}", outcome.report);
}

/// `jacobi_multi --exchange onesided` between two processes on two GPUs: the test launches itself twice through `gpu_pipeline::launcher` (what
/// `gpu-pipeline-launch -n 2` runs); each rank's kernel stores its edge rows into the other
/// process's halo window (CUDA IPC), and each rank checks its block against the same grid on
/// one rank (the `nccl` step) and the CPU solver.
#[test]
#[ignore = "needs two CUDA GPUs"]
fn jacobi_multi_onesided_exchange_between_two_processes() {
    const ROLE: &str = "GPU_PIPELINE_TEST_ROLE";
    const TEST: &str = "jacobi_multi_onesided_exchange_between_two_processes";
    let args = JacobiMultiArgs::parse_from([
        "jacobi_multi",
        "--exchange",
        "onesided",
        "--nx",
        "1024",
        "--ny",
        "1026",
        "--iterations",
        "100",
        "-q",
    ]);
    if std::env::var(ROLE).as_deref() == Ok("jacobi-onesided") {
        let outcome = jacobi_multi::run_cuda_rank(&args).unwrap();
        assert!(outcome.report.passed(), "{}", outcome.report);
        println!("{}", outcome.report);
        println!("jacobi onesided rank {}: passed", outcome.rank);
        return;
    }
    match (gpu_pipeline::Device::count(), gpu_pipeline::nccl::version()) {
        (Ok(n), Ok(version)) if n >= 2 => println!("{n} GPUs, NCCL {version}"),
        (Ok(n), Ok(_)) => {
            return println!("skipped: {n} GPU(s); NCCL needs a GPU per rank, and this test two");
        }
        (Err(e), _) | (_, Err(e)) => return println!("skipped: {e}"),
    }
    let exe = std::env::current_exe().unwrap();
    let report = gpu_pipeline::launcher::Launch::new(2, exe)
        .args([
            TEST,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "jacobi-onesided")
        .timeout(std::time::Duration::from_secs(300))
        .capture()
        .run()
        .unwrap();
    assert!(report.success(), "a rank failed:\n{}", report.summary());
    for r in &report.ranks {
        let done = format!("jacobi onesided rank {}: passed", r.rank);
        assert!(
            r.stdout.iter().any(|l| l.contains(&done)),
            "rank {}: {:?}",
            r.rank,
            r.stdout
        );
    }
}

/// The raw-driver anchor of `nbody` runs and its state stays finite (a few steps; the
/// example itself measures the speed).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_nbody_anchor_runs_with_raw_driver_calls() {
    let ctx = Context::cuda(0).unwrap();
    let bodies = nbody::initial_bodies(1000, 7);
    let rate = nbody::anchor::interactions_per_second(&ctx, &bodies, 1e-3, 0.0025, 5).unwrap();
    assert!(rate > 0.0 && rate.is_finite(), "{rate}");
}

#[test]
fn every_example_parses_the_log_flag() {
    let flags = ["x", "--log", "gpu_pipeline=debug"];
    let want = Some("gpu_pipeline=debug".to_owned());
    assert_eq!(Heat2dArgs::try_parse_from(flags).unwrap().log.log, want);
    assert_eq!(NbodyArgs::try_parse_from(flags).unwrap().log.log, want);
    assert_eq!(OverlapArgs::try_parse_from(flags).unwrap().log.log, want);
    assert_eq!(InteropArgs::try_parse_from(flags).unwrap().log.log, want);
    assert_eq!(CublasArgs::try_parse_from(flags).unwrap().log.log, want);
    assert_eq!(
        JacobiMultiArgs::try_parse_from(flags).unwrap().log.log,
        want
    );
    assert_eq!(JacobiArgs::try_parse_from(flags).unwrap().log.log, want);
    assert_eq!(
        StreamChunksArgs::try_parse_from(flags).unwrap().log.log,
        want
    );
    assert_eq!(HaloArgs::try_parse_from(flags).unwrap().log.log, want);
    assert_eq!(Heat2dArgs::try_parse_from(["x"]).unwrap().log.log, None);
    let bad = Heat2dArgs::try_parse_from(["x", "--log", "gpu_pipeline=loud"]).unwrap_err();
    assert!(bad.to_string().contains("not a log filter"), "{bad}");
}

#[test]
fn the_log_flag_and_rust_log_print_the_backend_choice() {
    if under_compute_sanitizer() {
        return;
    }
    let mut args = vec!["--log", "gpu_pipeline=info", "--no-png"];
    args.extend_from_slice(small_run("heat2d"));
    let output = run_example("heat2d", &args);
    assert_exit(&output, 0, "gpu-pipeline backend chosen");
    // The same through the environment; and nothing without either.
    let mut plain = vec!["--no-png"];
    plain.extend_from_slice(small_run("heat2d"));
    let output = example("heat2d")
        .args(&plain)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert_exit(&output, 0, "gpu-pipeline backend chosen");
    let output = example("heat2d")
        .args(&plain)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let (_, stderr) = assert_exit(&output, 0, "");
    assert!(!stderr.contains("backend chosen"), "{stderr}");
    let output = run_example("heat2d", &["--log", "gpu_pipeline=[", "--no-png"]);
    assert_exit(&output, 2, "not a log filter");
}

#[test]
fn no_help_text_shows_rustdoc_link_syntax() {
    if under_compute_sanitizer() {
        return;
    }
    for name in EXAMPLES {
        let output = run_example(name, &["--help"]);
        let (stdout, _) = assert_exit(&output, 0, "");
        assert!(
            !stdout.contains("[`") && !stdout.contains("`]"),
            "{name} --help shows rustdoc link syntax:\n{stdout}"
        );
    }
}

#[test]
fn gpu_sized_inputs_are_refused_on_the_cpu_with_an_estimate_and_the_flag() {
    if under_compute_sanitizer() {
        return;
    }
    // Sized to be refused on up to 1024 cores (the estimate scales with the core count, and
    // a machine of 64 cores ran the smaller sizes for minutes): at least 500 s even there.
    for (name, args) in [
        (
            "nbody",
            &["--bodies", "1000000", "--steps", "1000", "-q"][..],
        ),
        (
            "cublas",
            &[
                "--m",
                "8192",
                "--n",
                "8192",
                "--k",
                "8192",
                "--replays",
                "1000",
                "-q",
            ][..],
        ),
        (
            "heat2d",
            &[
                "--nx", "16384", "--ny", "16384", "--steps", "2000000", "--no-png", "-q",
            ][..],
        ),
    ] {
        let started = std::time::Instant::now();
        let output = run_example(name, args);
        let (_, stderr) = assert_exit(&output, 1, "on the CPU backend this run would take about");
        assert!(stderr.contains("--cpu-anyway"), "{name}: {stderr}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{name} was refused only after {:?}",
            started.elapsed()
        );
    }
    // The flag parses (the run itself is not started here).
    assert!(
        NbodyArgs::try_parse_from(["x", "--cpu-anyway"])
            .unwrap()
            .cpu_anyway
    );
    assert!(
        CublasArgs::try_parse_from(["x", "--cpu-anyway"])
            .unwrap()
            .cpu_anyway
    );
    assert!(
        Heat2dArgs::try_parse_from(["x", "--cpu-anyway"])
            .unwrap()
            .cpu_anyway
    );
}

#[test]
fn jacobi_refuses_check_every_above_max_iters() {
    if under_compute_sanitizer() {
        return;
    }
    let output = run_example("jacobi", &["--max-iters", "10", "--check-every", "11"]);
    assert_exit(&output, 2, "`--check-every 11` exceeds `--max-iters 10`");
    let args = JacobiArgs::parse_from(["jacobi", "--max-iters", "10", "--check-every", "10"]);
    assert_eq!(args.validate(), Ok(()));
}

#[test]
fn nbody_refuses_an_unreasonable_dt_and_stops_on_a_non_finite_state() {
    if under_compute_sanitizer() {
        return;
    }
    let output = run_example("nbody", &["--dt", "1e30"]);
    assert_exit(&output, 2, "is not in (0, 1]");
    assert_eq!(examples::common::first_non_finite(&[1.0, 2.0]), None);
    assert_eq!(
        examples::common::first_non_finite(&[1.0, f32::NAN, f32::INFINITY]),
        Some(1)
    );
    // The largest step allowed, with almost no softening: close encounters overflow, and
    // the run stops with an error naming the step instead of reporting NaN checks.
    let args = NbodyArgs::parse_from([
        "nbody",
        "--bodies",
        "64",
        "--steps",
        "200",
        "--sample-every",
        "1",
        "--dt",
        "1",
        "--eps",
        "1e-30",
        "--reference-steps",
        "0",
        "-q",
    ]);
    let err = nbody::run(&Context::cpu(), &args)
        .map(|_| ())
        .expect_err("the state overflows");
    assert!(
        err.to_string().contains("stopped being finite by step"),
        "{err}"
    );
}

/// `cg` on the checked CPU backend: the device loop converges to the tolerance in the CPU
/// solver's iterations with its answer bit for bit (both sum the dot products in index order
/// there), on a square and a lopsided grid; a loop stopped by `--max-iters` says so and
/// passes; no race.
#[test]
fn cg_converges_like_the_cpu_solver_on_the_cpu_backend() {
    let ctx = Context::cpu_checked();
    for (nx, ny) in [("24", "24"), ("37", "5")] {
        let args = CgArgs::parse_from(["cg", "--nx", nx, "--ny", ny, "--tol", "1e-9"]);
        let outcome = cg::run(&ctx, &args).unwrap();
        assert_passed(&ctx, &outcome.report);
        assert!(outcome.reached);
        assert!(outcome.full_reference);
        assert!(
            outcome.relative_residual <= 2e-9,
            "{}",
            outcome.relative_residual
        );
        let b = cg::rhs(args.nx, args.ny);
        let bb: f64 = b.iter().map(|v| v * v).sum();
        let tol = f64::from(args.tol);
        let (want, iterations) = cg::host::solve(args.nx, args.ny, &b, tol * tol * bb, 20_000);
        assert_eq!(outcome.iterations, iterations);
        assert_eq!(outcome.x, want);
    }
    let args = CgArgs::parse_from(["cg", "--nx", "16", "--ny", "16", "--max-iters", "3"]);
    let outcome = cg::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(!outcome.reached);
    assert_eq!(outcome.iterations, 3);
    assert!(
        outcome
            .report
            .notes
            .iter()
            .any(|n| n.contains("not reached")),
        "{}",
        outcome.report
    );
}

/// `cg` on a GPU: one launch of a conditional WHILE node solves 512x512 to 1e-8 with the
/// dot products and step scalars on the device; the answer satisfies the equation, agrees
/// with the CPU solver to 1e-6 and ends within two iterations of it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cg_passes_on_a_gpu() {
    let ctx = Context::cuda(0).unwrap();
    let args = CgArgs::parse_from(["cg", "--nx", "512", "--ny", "512", "--reference", "full"]);
    let outcome = cg::run(&ctx, &args).unwrap();
    println!("{}", outcome.report);
    assert!(outcome.report.passed(), "{}", outcome.report);
    assert!(outcome.reached);
    assert!(outcome.full_reference);
    assert!(
        outcome.relative_residual <= 2e-8,
        "{}",
        outcome.relative_residual
    );
    assert!(outcome.iterations > 100, "{}", outcome.iterations);
}
