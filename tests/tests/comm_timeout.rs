//! Communication deadlines on simulated CPU ranks: every mismatched program ends every rank
//! with a communication error naming the pipeline, the stage, the operation and the peer,
//! within the deadline and a little slack, eagerly and replayed from a captured graph; a rank
//! that leaves early fails its peer at once; an aborted communicator refuses a second use.
//! (The environment variable is tested in `comm_timeout_env.rs`, its own process.)

use std::time::{Duration, Instant};

use gpu_pipeline::collective::CommCause;
use gpu_pipeline::{Communicator, Context, Error};
use tests::mismatch::{self, Mismatch, Mode, Total, TotalParams, check_comm_error};

const DEADLINE: Duration = Duration::from_millis(1000);
/// Thread start-up, a second operation failing at once after the first, a loaded machine.
const SLACK: Duration = Duration::from_millis(1500);

/// Runs `rank` on two simulated ranks with [`DEADLINE`], each with its own checked context.
fn on_two<R: Send>(rank: impl Fn(&Context, &Communicator) -> R + Sync) -> Vec<R> {
    let ranks = Communicator::cpu_ranks_with_timeout(2, DEADLINE).unwrap();
    let rank = &rank;
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|comm| scope.spawn(move || rank(&Context::cpu_checked(), &comm)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Both ranks of `mismatch` by `mode` end with the error within the deadline plus slack,
/// each naming the mismatch's pipeline and stage (or, for a rank whose half completed, the
/// all-reduce after it), and refuse a second use at once.
fn every_rank_fails(mismatch: Mismatch, mode: Mode) -> Vec<String> {
    on_two(|ctx, comm| {
        let (ended, took) = mismatch::mismatched_rank(ctx, comm, mismatch, mode);
        let rank = comm.rank();
        let err = ended.expect_err("a mismatched program completed");
        assert!(took < DEADLINE + SLACK, "rank {rank} took {took:?}");
        let text = check_comm_error(comm, &err, DEADLINE);
        let failure = comm.failure().unwrap();
        let (pipeline, stage) = mismatch.site();
        assert!(
            (failure.pipeline, failure.stage) == (Some(pipeline), Some(stage))
                || (failure.pipeline, failure.stage) == (Some("Total"), Some("reduce")),
            "rank {rank}: {text}"
        );
        // A second use of the aborted communicator is refused at once, naming the first.
        let again = Instant::now();
        let mut x =
            gpu_pipeline::DeviceBuffer::<f32>::zeros(&gpu_pipeline::Stream::new(ctx).unwrap(), 1)
                .unwrap();
        let err = Total::new(ctx)
            .unwrap()
            .run_steps(TotalParams { comm, x: &mut x }, 1)
            .and_then(|run| run.wait())
            .unwrap_err();
        let refusal = err.comm_failure().expect("a typed refusal");
        assert!(matches!(refusal.cause, CommCause::Aborted { .. }), "{err}");
        assert!(again.elapsed() < Duration::from_millis(500));
        text
    })
}

/// Both ranks wait on the same deadline: the first to give up aborts, and the other then
/// either times out too or sees it leave, whichever comes first.
fn timed_out_or_saw_it_leave(texts: &[String]) {
    let timed_out =
        |t: &String| t.contains("did not complete within the 1s communication deadline");
    assert!(texts.iter().any(timed_out), "{texts:#?}");
    for (rank, text) in texts.iter().enumerate() {
        let other = 1 - rank;
        assert!(
            timed_out(text) || text.contains(&format!("rank {other} left")),
            "{text}"
        );
        assert!(text.contains(&format!("to rank {other}")), "{text}");
    }
}

#[test]
fn a_send_with_no_recv_times_out_on_both_ranks_eagerly() {
    let texts = every_rank_fails(Mismatch::SendWithoutRecv, Mode::Eager);
    for text in &texts {
        assert!(
            text.contains("pipeline `Push`") && text.contains("stage `push`"),
            "{text}"
        );
    }
    timed_out_or_saw_it_leave(&texts);
}

#[test]
fn a_send_with_no_recv_times_out_on_both_ranks_in_a_replay() {
    let texts = every_rank_fails(Mismatch::SendWithoutRecv, Mode::Replay);
    for text in &texts {
        assert!(text.contains("stage `push`"), "{text}");
    }
    timed_out_or_saw_it_leave(&texts);
}

#[test]
fn counts_that_differ_fail_both_ranks_eagerly_and_in_a_replay() {
    for mode in [Mode::Eager, Mode::Replay] {
        for text in every_rank_fails(Mismatch::CountsDiffer, mode) {
            // The CPU backend sees the lengths differ at once (NCCL may hang, then time out).
            assert!(
                text.contains("stage `swap`") && text.contains("the ranks disagree"),
                "{mode:?}: {text}"
            );
            assert!(
                text.contains("sent 32 bytes and the receive buffer has 16")
                    || text.contains("sent 16 bytes and the receive buffer has 32"),
                "{text}"
            );
        }
    }
}

#[test]
fn a_recv_from_the_wrong_peer_times_out_on_both_ranks_eagerly_and_in_a_replay() {
    for mode in [Mode::Eager, Mode::Replay] {
        let texts = every_rank_fails(Mismatch::WrongPeer, mode);
        // Rank 1 waits for a message from itself, rank 0 for rank 1 to take its message:
        // the first to give up aborts, the other times out too or sees it leave.
        assert!(
            texts[1].contains("recv from rank 1") || texts[1].contains("rank 0 left"),
            "{mode:?}: {}",
            texts[1]
        );
        assert!(
            texts[0].contains("to rank 1") && texts[0].contains("stage `swap`"),
            "{mode:?}: {}",
            texts[0]
        );
        assert!(
            texts.iter().any(|t| t.contains("did not complete within")),
            "{texts:#?}"
        );
    }
}

#[test]
fn a_matched_exchange_still_completes() {
    for mode in [Mode::Eager, Mode::Replay] {
        on_two(|ctx, comm| {
            let (ended, _) = mismatch::mismatched_rank(ctx, comm, Mismatch::None, mode);
            ended.unwrap();
            assert!(comm.failure().is_none());
            assert!(ctx.races().is_empty(), "{:?}", ctx.races());
        });
    }
}

/// A rank that returns after one step (dropping its communicator, status 0) fails its peer's
/// next step at once, naming it; one that stays but stops communicating fails it at the
/// deadline.
#[test]
fn a_rank_that_returns_early_fails_its_peer_within_the_deadline() {
    for stays in [false, true] {
        on_two(|ctx, comm| {
            let stream = gpu_pipeline::Stream::new(ctx).unwrap();
            let mut x = gpu_pipeline::DeviceBuffer::from_slice(&stream, &[1.0f32]).unwrap();
            let mut total = Total::new(ctx).unwrap();
            let mut step = || {
                total
                    .run_steps(TotalParams { comm, x: &mut x }, 1)
                    .and_then(|run| run.wait())
            };
            step().unwrap();
            if comm.rank() == 1 {
                if stays {
                    std::thread::sleep(DEADLINE + SLACK);
                }
                return;
            }
            let start = Instant::now();
            let err = step().unwrap_err();
            let took = start.elapsed();
            let text = check_comm_error(comm, &err, DEADLINE);
            let failure = comm.failure().unwrap();
            assert_eq!(
                (failure.pipeline, failure.stage),
                (Some("Total"), Some("reduce"))
            );
            if stays {
                assert!(failure.is_timeout(), "{text}");
                assert!(took >= DEADLINE && took < DEADLINE + SLACK, "{took:?}");
            } else {
                assert_eq!(failure.cause, CommCause::PeerGone { peer: 1 }, "{text}");
                assert_eq!(failure.peer, Some(1));
                assert!(took < Duration::from_millis(500), "{took:?}");
            }
        });
    }
}

#[test]
fn the_builder_sets_the_deadline_and_refuses_zero() {
    let ranks = Communicator::cpu_ranks_with_timeout(3, Duration::from_millis(1500)).unwrap();
    assert!(
        ranks
            .iter()
            .all(|c| c.timeout() == Duration::from_millis(1500))
    );
    let err = Communicator::cpu_ranks_with_timeout(2, Duration::ZERO).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains("positive duration"), "{err}");
}
