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

use gpu_pipeline::rendezvous::RankInfo;
use gpu_pipeline::{Communicator, Context, Device};
use tests::onesided::{self, Omit, Plan};
use tests::ranks;

const WORKER: &str = "onesided-worker";
const TEST: &str = "one_sided_windows_between_processes";

#[test]
#[ignore = "needs two CUDA GPUs"]
fn one_sided_windows_between_processes() {
    if ranks::is_worker(WORKER) {
        return worker();
    }
    // NCCL wants a GPU per rank.
    let Some(gpus) = ranks::gpus_or_skip(2) else {
        return;
    };
    ranks::launch_ranks(TEST, WORKER, ranks::requested(2, 2, gpus));
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
    println!("{}", ranks::done_line(WORKER, me.rank, me.world_size));
}
