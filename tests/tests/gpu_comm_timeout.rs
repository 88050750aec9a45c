//! Communication deadlines on two GPUs, one process per rank through the launcher
//! ([`tests::ranks`], as `gpu_multi.rs`): each test launches this binary twice with `GPU_PIPELINE_TEST_ROLE`
//! naming its scenario and `GPU_PIPELINE_COMM_TIMEOUT=5`; each worker checks its own outcome
//! (the error, what it names, the elapsed time) and prints a line the launching test looks
//! for. A worker that hangs is killed by the launch's own timeout and fails the test.
//!
//! Run on a machine with two GPUs:
//! `cargo test -p tests --test gpu_comm_timeout -- --ignored --test-threads=1 --nocapture`
//!
//! With `GPU_PIPELINE_SEGV_BACKTRACE=1` (passed on to the workers) a worker that dies of
//! SIGSEGV prints the faulting thread's backtrace to stderr first ([`tests::segv`]).

use std::time::{Duration, Instant};

use gpu_pipeline::collective::{COMM_TIMEOUT_ENV, CommCause};
use gpu_pipeline::rendezvous::RankInfo;
use gpu_pipeline::{Communicator, Context};
use tests::mismatch::{self, Mismatch, Mode, Total, TotalParams, check_comm_error, failure_of};
use tests::ranks;

const DEADLINE: Duration = Duration::from_secs(5);
/// The watchdog's poll, the abort draining NCCL's kernels, a second operation failing after
/// the first.
const SLACK: Duration = Duration::from_secs(5);

/// Launches this binary's `test` on two GPUs as role `role` ([`ranks::launch_ranks_with`]:
/// every rank must print its done line); no rank may report a communicator torn down while
/// a stream captured.
fn launch(test: &str, role: &str) {
    if std::env::var_os(ranks::ROLE_ENV).is_some() || ranks::gpus_or_skip(2).is_none() {
        return;
    }
    let env = [(COMM_TIMEOUT_ENV, "5"), ("NCCL_DEBUG", "WARN")];
    let report = ranks::launch_ranks_with(test, role, 2, Duration::from_secs(120), &env);
    for r in &report.ranks {
        // A communicator aborted while a stream captured: NCCL's teardown failed and leaked.
        for line in r.stdout.iter().chain(&r.stderr) {
            assert!(
                !line.contains("stream is capturing") && !line.contains("failed in destroy/abort"),
                "rank {}: {line}",
                r.rank
            );
        }
    }
}

/// This worker's rank, context and (nonblocking, 5 s) communicator.
fn open() -> (RankInfo, Context, Communicator) {
    tests::segv::install_from_env();
    let me = RankInfo::from_env().expect("the launcher's variables");
    let ctx = Context::cuda(me.local_rank).expect("this rank's GPU");
    let comm = Communicator::from_env(&ctx).expect("the communicator");
    assert_eq!(comm.timeout(), DEADLINE);
    (me, ctx, comm)
}

/// A worker whose mismatched step must end with the typed error within the deadline plus
/// slack, naming the stage, on both ranks (what each rank may see is in the `match`); the
/// context stays usable afterwards. The unmatched operation is a recv: NCCL 2.28 completed even
/// a 64 MB send with no recv between two H200s (NVLink), so there a send does not hang.
fn mismatched_worker(role: &str, mismatch: Mismatch, mode: Mode) {
    let (me, ctx, comm) = open();
    // A matched exchange first: NCCL connects the peers lazily.
    let (warm, _) = mismatch::mismatched_rank(&ctx, &comm, Mismatch::None, Mode::Eager);
    warm.expect("a matched exchange completes on the nonblocking communicator");
    let (ended, took) = mismatch::mismatched_rank(&ctx, &comm, mismatch, mode);
    let err = ended.expect_err("a mismatched program completed");
    println!("rank {}: ended after {took:?}: {}", me.rank, err.report());
    assert!(took < DEADLINE + SLACK, "rank {} took {took:?}", me.rank);
    check_comm_error(&comm, &err, DEADLINE);
    let failure = failure_of(&err);
    let (pipeline, stage) = mismatch.site();
    let named = (failure.pipeline, failure.stage);
    let cause = &failure.cause;
    match (mismatch, me.rank) {
        // NCCL refuses a recv from self with no send at once: a prompt, typed failure of the
        // stage that enqueued it.
        (Mismatch::WrongPeer, 1) => {
            assert!(
                took < SLACK,
                "rank 1 took {took:?} for an immediate refusal"
            );
            assert!(
                matches!(cause, CommCause::Nccl { .. } | CommCause::Mismatch { .. }),
                "{failure}"
            );
            assert_eq!(named, (Some(pipeline), Some(stage)), "{failure}");
        }
        // The peer of that rank, and both ranks of a send nobody receives: the deadline, or
        // the peer's abort seen first.
        _ => {
            assert!(
                matches!(
                    cause,
                    CommCause::Timeout { .. } | CommCause::PeerGone { .. } | CommCause::Nccl { .. }
                ),
                "{failure}"
            );
            assert!(
                named == (Some(pipeline), Some(stage)) || named == (Some("Total"), Some("reduce")),
                "{failure}"
            );
        }
    }
    // The context is still usable after the abort.
    let stream = gpu_pipeline::Stream::new(&ctx).unwrap();
    let b = gpu_pipeline::DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0]).unwrap();
    assert_eq!(b.to_vec(&stream).unwrap(), [1.0, 2.0]);
    println!("{}", ranks::done_line(role, me.rank, me.world_size));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_recv_with_no_send_times_out_on_both_gpus_eagerly() {
    const ROLE: &str = "recv-without-send";
    if ranks::is_worker(ROLE) {
        return mismatched_worker(ROLE, Mismatch::RecvWithoutSend, Mode::Eager);
    }
    launch("a_recv_with_no_send_times_out_on_both_gpus_eagerly", ROLE);
}

/// Rank 1's recv from itself is refused by NCCL while the graph is captured: the capture
/// fails at once with the typed error naming the stage, the communicator is aborted only
/// after the capture has ended (no NCCL warning about a capturing stream), and rank 0's
/// replay fails within the deadline.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_recv_from_the_wrong_peer_fails_both_gpus_in_a_replay() {
    const ROLE: &str = "wrong-peer-replay";
    if ranks::is_worker(ROLE) {
        return mismatched_worker(ROLE, Mismatch::WrongPeer, Mode::Replay);
    }
    launch(
        "a_recv_from_the_wrong_peer_fails_both_gpus_in_a_replay",
        ROLE,
    );
}

/// As the replay, eagerly: rank 1 fails at once, rank 0 within the deadline.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_recv_from_the_wrong_peer_fails_both_gpus_eagerly() {
    const ROLE: &str = "wrong-peer-eager";
    if ranks::is_worker(ROLE) {
        return mismatched_worker(ROLE, Mismatch::WrongPeer, Mode::Eager);
    }
    launch("a_recv_from_the_wrong_peer_fails_both_gpus_eagerly", ROLE);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_recv_with_no_send_times_out_on_both_gpus_in_a_replay() {
    const ROLE: &str = "recv-without-send-replay";
    if ranks::is_worker(ROLE) {
        return mismatched_worker(ROLE, Mismatch::RecvWithoutSend, Mode::Replay);
    }
    launch(
        "a_recv_with_no_send_times_out_on_both_gpus_in_a_replay",
        ROLE,
    );
}

/// Rank 1 exits with status 0 after one matched step; rank 0's next step fails within the
/// deadline plus slack.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_rank_exiting_early_fails_its_peer_within_the_deadline() {
    const ROLE: &str = "early-exit";
    if ranks::is_worker(ROLE) {
        let (me, ctx, comm) = open();
        let stream = gpu_pipeline::Stream::new(&ctx).unwrap();
        let mut x = gpu_pipeline::DeviceBuffer::from_slice(&stream, &[1.0f32]).unwrap();
        let mut total = Total::new(&ctx).unwrap();
        let mut step = || {
            total
                .run_steps(
                    TotalParams {
                        comm: &comm,
                        x: &mut x,
                    },
                    1,
                )
                .and_then(|run| run.wait())
        };
        step().expect("the matched step");
        if me.rank == 1 {
            println!("{}", ranks::done_line(ROLE, 1, 2));
            std::process::exit(0);
        }
        let start = Instant::now();
        let err = step().expect_err("a step with a departed peer completed");
        let took = start.elapsed();
        println!("rank 0: ended after {took:?}: {}", err.report());
        assert!(took < DEADLINE + SLACK, "{took:?}");
        check_comm_error(&comm, &err, DEADLINE);
        println!("{}", ranks::done_line(ROLE, 0, 2));
        return;
    }
    launch(
        "a_rank_exiting_early_fails_its_peer_within_the_deadline",
        ROLE,
    );
}

/// No regression: matched exchanges and all-reduces, eagerly and replayed, on the
/// nonblocking communicator.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_matched_pipeline_still_passes_on_nonblocking_communicators() {
    const ROLE: &str = "matched";
    if ranks::is_worker(ROLE) {
        let (me, ctx, comm) = open();
        for mode in [Mode::Eager, Mode::Replay, Mode::Replay] {
            let (ended, took) = mismatch::mismatched_rank(&ctx, &comm, Mismatch::None, mode);
            ended.unwrap_or_else(|e| panic!("{mode:?}: {}", e.report()));
            assert!(took < DEADLINE, "{took:?}");
        }
        tests::multi::ring_rank(&ctx, &comm, 4096, 66);
        comm.async_error().expect("no failure");
        println!("{}", ranks::done_line(ROLE, me.rank, me.world_size));
        return;
    }
    launch(
        "a_matched_pipeline_still_passes_on_nonblocking_communicators",
        ROLE,
    );
}
