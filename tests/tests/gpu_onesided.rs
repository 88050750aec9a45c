//! One-sided halo exchange between processes on GPUs: the exchange of
//! `tests/src/onesided.rs` (which `onesided.rs` runs on simulated ranks in CI), one process
//! per rank, as in production. The test launches this very binary once per rank (two, or
//! `GPU_PIPELINE_TEST_RANKS`) through `gpu_pipeline::launcher`; each worker opens its GPU
//! (`local_rank % GPUs`; NCCL wants a GPU per rank, so it needs two), builds its NCCL communicator,
//! makes its `Window` (CUDA IPC handles all-gathered through NCCL), and runs the chain
//! exchange eagerly and replayed from a captured graph: kernels store straight into the
//! neighbours' windows, ordered by `cuStreamWriteValue32`/`cuStreamWaitValue32` signals.
//! Every rank checks every exchange of its history against what its neighbours wrote (the
//! result one rank computes for itself), runs the same exchange inside a `gpu_pipeline!` step
//! (a `call` statement, captured and replayed with a setter, then eagerly), checked the same
//! way, then prints a line the launching test looks for.
//!
//! Skipped, saying why, without a driver, a GPU or NCCL.

use std::time::Duration;

use gpu_pipeline::launcher::Launch;
use gpu_pipeline::rendezvous::RankInfo;
use gpu_pipeline::{Communicator, Context, Device, nccl};
use tests::onesided::{self, Omit, Plan};

const ROLE_ENV: &str = "GPU_PIPELINE_TEST_ROLE";
const RANKS_ENV: &str = "GPU_PIPELINE_TEST_RANKS";
const WORKER: &str = "onesided-worker";
const TEST: &str = "one_sided_windows_between_processes";

#[test]
#[ignore = "needs two CUDA GPUs"]
fn one_sided_windows_between_processes() {
    if std::env::var(ROLE_ENV).as_deref() == Ok(WORKER) {
        worker();
        return;
    }
    if tests::skip_under_compute_sanitizer("CUDA IPC between processes is not a sanitizer target") {
        return;
    }
    let devices = match Device::count() {
        Ok(n) if n < 2 => {
            return println!("skipped: {n} GPU(s); NCCL needs a GPU per rank, and this test two");
        }
        Ok(n) => n,
        Err(e) => return println!("skipped: no CUDA driver ({e})"),
    };
    if let Err(e) = nccl::version() {
        return println!("skipped: {e}");
    }
    let ranks = std::env::var(RANKS_ENV)
        .ok()
        .and_then(|r| r.parse::<usize>().ok())
        .unwrap_or(2)
        .clamp(2, devices);
    println!("{devices} GPU(s); launching {ranks} rank(s)");
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut launch = Launch::new(ranks, exe)
        .args([
            TEST,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE_ENV, WORKER)
        .timeout(Duration::from_secs(300))
        .capture();
    if std::env::var_os("NCCL_DEBUG").is_none() {
        launch = launch.env("NCCL_DEBUG", "WARN");
    }
    let report = launch.run().expect("the ranks start");
    assert!(report.success(), "a rank failed:\n{}", report.summary());
    for r in &report.ranks {
        let done = format!(
            "onesided worker rank {} of {ranks}: all checks passed",
            r.rank
        );
        assert!(
            r.stdout.iter().any(|l| l.contains(&done)),
            "rank {} did not finish its checks; its output: {:?}",
            r.rank,
            r.stdout
        );
    }
}

/// One rank: the chain exchange eagerly and from a graph, each checked.
fn worker() {
    let me = RankInfo::from_env().expect("the launcher's variables");
    let gpus = Device::count().expect("the driver");
    let ctx = Context::cuda(me.local_rank % gpus).expect("this rank's GPU");
    let comm = Communicator::from_env(&ctx).expect("the communicator");
    for graph in [false, true] {
        // 64 Ki elements per halo: 256 KiB stored into each neighbour per exchange.
        let plan = Plan {
            n: 1 << 16,
            iterations: 4,
            rounds: 50,
            graph,
            omit: Omit::Nothing,
        };
        let (history, elapsed) =
            onesided::chain_rank_timed(&ctx, &comm, plan).expect("the exchange runs");
        // Each exchange: one store per neighbour, two waits and two signals per neighbour,
        // and the copy of the window (the figure is for comparing mechanisms, not a bench).
        let exchanges = (plan.rounds * plan.iterations) as f64;
        println!(
            "rank {}: {:.2} us per exchange of {} KiB halos (graph: {graph})",
            me.rank,
            elapsed.as_secs_f64() * 1e6 / exchanges,
            plan.n * 4 / 1024
        );
        onesided::check_history(me.rank, me.world_size, plan, &history)
            .unwrap_or_else(|e| panic!("graph {graph}: {e}"));
        println!("rank {}: one-sided exchange ok (graph: {graph})", me.rank);
    }
    // The same exchange inside a `gpu_pipeline!` step (a `call`), replayed with a setter.
    let (n, steps) = (4096, 20);
    let (replayed, eager) =
        onesided::pipeline_rank(&ctx, &comm, n, steps).expect("the pipeline runs");
    let want = |offset| onesided::pipeline_halos(me.rank, me.world_size, n, offset);
    assert!(replayed == want(steps - 1), "the replayed step's halos");
    assert!(eager == want(steps), "the eager step's halos");
    println!("rank {}: one-sided exchange in a pipeline ok", me.rank);
    comm.async_error().expect("no asynchronous NCCL error");
    println!(
        "onesided worker rank {} of {}: all checks passed",
        me.rank, me.world_size
    );
}
