//! Multi-GPU pipelines on GPUs: the pipelines `multi_rank.rs` and `multi_device.rs` run on
//! the CPU backend in CI (`tests/src/multi.rs`), here on CUDA.
//!
//! - `nccl_pipelines_between_processes`: one process per rank, as in production. The test
//!   launches this very binary once per GPU (up to four, or `GPU_PIPELINE_TEST_RANKS`)
//!   through `gpu_pipeline::launcher` (what `gpu-pipeline-launch` runs) with
//!   `GPU_PIPELINE_TEST_ROLE=multi-worker`; each worker opens its GPU, builds its NCCL
//!   communicator from the launcher's variables (TCP rendezvous over loopback) and runs the
//!   halo-ring pipeline (send/recv groups and an all_reduce, eagerly and replayed from a
//!   captured graph) and the collectives pipeline, checking every result, then prints a line
//!   the launching test looks for. With one GPU, one rank runs them with itself as the peer.
//! - `a_pipeline_over_two_devices_of_one_process`: peer copies and kernels on GPUs 0 and 1
//!   driven by one process (on a machine with one GPU, two handles to it).
//!
//! Skipped, saying why, without a driver, a GPU or (for NCCL) the library.

use gpu_pipeline::rendezvous::RankInfo;
use gpu_pipeline::{Communicator, Context, Device};
use tests::{multi, ranks};

const WORKER: &str = "multi-worker";
const TEST: &str = "nccl_pipelines_between_processes";

#[test]
#[ignore = "needs a CUDA GPU"]
fn nccl_pipelines_between_processes() {
    if ranks::is_worker(WORKER) {
        return worker();
    }
    let Some(gpus) = ranks::gpus_or_skip(1) else {
        return;
    };
    ranks::launch_ranks(TEST, WORKER, ranks::requested(gpus.min(4), 1, gpus));
}

/// One rank: both pipelines, checked.
fn worker() {
    let me = RankInfo::from_env().expect("the launcher's variables");
    assert_eq!(
        std::env::var("NCCL_NVLS_ENABLE").as_deref(),
        Ok("0"),
        "the launcher keeps NVLink multicast off"
    );
    let ctx = Context::cuda(me.local_rank).expect("this rank's GPU");
    let comm = Communicator::from_env(&ctx).expect("the communicator");
    assert_eq!((comm.rank(), comm.size()), (me.rank, me.world_size));
    // 4096 columns, 64 interior rows: halo rows of 16 KiB.
    multi::ring_rank(&ctx, &comm, 4096, 66);
    println!("rank {}: halo ring ok", me.rank);
    multi::collectives_rank(&ctx, &comm);
    println!("rank {}: collectives ok", me.rank);
    comm.async_error().expect("no asynchronous NCCL error");
    println!("{}", ranks::done_line(WORKER, me.rank, me.world_size));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_pipeline_over_two_devices_of_one_process() {
    let devices = match Device::count() {
        Ok(0) => return println!("skipped: the CUDA driver sees no GPU"),
        Ok(n) => n,
        Err(e) => return println!("skipped: no CUDA driver ({e})"),
    };
    let gpu0 = Context::cuda(0).unwrap();
    let gpu1 = Context::cuda(if devices > 1 { 1 } else { 0 }).unwrap();
    let direct = gpu0.enable_peer_access(&gpu1).unwrap() && gpu1.enable_peer_access(&gpu0).unwrap();
    println!(
        "devices {} and {}: peer copies {}",
        gpu0.device_index(),
        gpu1.device_index(),
        if direct {
            "direct"
        } else {
            "staged by the driver"
        }
    );
    multi::halves(&gpu0, &gpu1, 1 << 20);
    println!("two-device pipeline: all checks passed");
}
