//! One-sided halo exchange between simulated ranks: kernels store straight into their
//! neighbours' [`Window`]s, ordered by the windows' signals, eagerly and replayed from a
//! captured graph, on 2, 3 and 4 ranks (threads, one simulated device each, one race
//! detector for all). Each rank's history is checked against what its neighbours wrote; the
//! race detector must find nothing, and must name the window when a signal is left out.
//! `tests/src/onesided.rs` holds the exchange; `gpu_onesided.rs` runs it between processes.
//! The pipelines whose signals the macro derives (`RingStep`, `RingReadFirst`) run here too.

use std::time::Duration;

use gpu_pipeline::{Communicator, Context, Error, Stream, Window};
use tests::onesided::{self, Omit, Plan};

/// Runs `rank` on one simulated rank per device of `devices`, each on a thread of its own
/// with its communicator (deadline `timeout`) and its device: each rank's result and its
/// context (for its races), in rank order.
fn each_rank<R: Send>(
    devices: Vec<Context>,
    timeout: Duration,
    rank: impl Fn(&Context, &Communicator) -> R + Sync,
) -> Vec<(R, Context)> {
    let comms = Communicator::cpu_ranks_with_timeout(devices.len(), timeout).unwrap();
    let rank = &rank;
    std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .zip(devices)
            .map(|(comm, ctx)| scope.spawn(move || (rank(&ctx, &comm), ctx)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The results of `rank` on the ranks of `devices`, without their contexts.
fn rank_results<R: Send>(
    devices: Vec<Context>,
    timeout: Duration,
    rank: impl Fn(&Context, &Communicator) -> R + Sync,
) -> Vec<R> {
    each_rank(devices, timeout, rank)
        .into_iter()
        .map(|(result, _)| result)
        .collect()
}

/// Runs the plan on `size` simulated ranks; each rank's result and its context's races.
fn on_ranks(size: usize, plan: Plan) -> Vec<(gpu_pipeline::Result<Vec<f32>>, Context)> {
    each_rank(
        Context::cpu_checked_devices(size),
        Duration::from_secs(20),
        |ctx, comm| onesided::chain_rank(ctx, comm, plan),
    )
}

fn plan(graph: bool) -> Plan {
    Plan {
        n: 16,
        iterations: 3,
        rounds: 4,
        graph,
        omit: Omit::Nothing,
    }
}

fn exchange_checks(size: usize, plan: Plan) {
    let results = on_ranks(size, plan);
    for (rank, (history, ctx)) in results.into_iter().enumerate() {
        let history = history.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        onesided::check_history(rank, size, plan, &history).unwrap();
        assert!(ctx.races().is_empty(), "rank {rank}: {:?}", ctx.races());
    }
}

#[test]
fn two_ranks_store_into_each_others_windows_eagerly() {
    exchange_checks(2, plan(false));
}

#[test]
fn three_ranks_store_into_each_others_windows_eagerly() {
    exchange_checks(3, plan(false));
}

#[test]
fn four_ranks_replay_the_exchange_from_a_captured_graph() {
    exchange_checks(4, plan(true));
}

#[test]
fn two_ranks_replay_the_exchange_from_a_captured_graph() {
    exchange_checks(2, plan(true));
}

/// The races every rank's context saw (one detector for all ranks), as text.
fn races(results: &[(gpu_pipeline::Result<Vec<f32>>, Context)]) -> Vec<String> {
    results[0]
        .1
        .races()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_read_no_signal_orders_is_a_race_naming_the_window() {
    let plan = Plan {
        omit: Omit::WaitWrittenOnRank1,
        ..plan(false)
    };
    let results = on_ranks(2, plan);
    let races = races(&results);
    assert!(
        races
            .iter()
            .any(|r| r.contains("`window of rank 1`") && r.contains("affine")),
        "the detector must name rank 1's window: {races:#?}"
    );
    // The rank that read without waiting sees the race at its synchronize.
    let err = results[1].0.as_ref().unwrap_err();
    assert!(err.to_string().contains("race"), "{err}");
}

#[test]
fn a_write_no_signal_orders_after_the_neighbours_read_is_a_race() {
    let plan = Plan {
        omit: Omit::WaitReadOnRank0,
        ..plan(false)
    };
    let results = on_ranks(2, plan);
    let races = races(&results);
    // Rank 0's next write and rank 1's read of the previous halo are unordered: the detector
    // names the pair by whichever of the two the ranks' threads ran first, so a write that
    // ran ahead of the read is a read-after-write. Either way it is this pair.
    assert!(
        races.iter().any(|r| r.contains("`window of rank 1`")
            && r.contains("affine")
            && (r.contains("write-after-read") || r.contains("read-after-write"))),
        "the detector must name rank 1's window: {races:#?}"
    );
}

#[test]
fn a_wait_whose_signal_never_comes_is_an_error_at_the_deadline() {
    let outcome: Vec<gpu_pipeline::Result<()>> = rank_results(
        Context::cpu_checked_devices(2),
        Duration::from_millis(300),
        |ctx, comm| {
            let stream = Stream::new(ctx)?;
            let other = 1 - comm.rank();
            let window = Window::<f32>::new(comm, &stream, 4, &[other])?;
            // Rank 0 waits for a write rank 1 never signals.
            if comm.rank() == 0 {
                window.wait_written(&stream, other)?;
            }
            stream.synchronize()
        },
    );
    let err = outcome[0].as_ref().unwrap_err().to_string();
    assert!(
        err.contains("never posted") && err.contains("ready of rank 0's window for rank 1"),
        "{err}"
    );
    outcome[1].as_ref().unwrap();
}

#[test]
fn windows_refuse_bad_peers_and_unequal_lengths() {
    let errors: Vec<String> = rank_results(
        Context::cpu_devices(2),
        Duration::from_secs(5),
        |ctx, comm| {
            let stream = Stream::new(ctx).unwrap();
            let me = comm.rank();
            let own = Window::<f32>::new(comm, &stream, 4, &[me]).unwrap_err();
            let past = Window::<f32>::new(comm, &stream, 4, &[2]).unwrap_err();
            // Collective: both ranks get here; their lengths differ.
            let unequal = Window::<f32>::new(comm, &stream, 4 + me, &[1 - me]).unwrap_err();
            [own, past, unequal]
                .map(|e: Error| e.to_string())
                .join("\n")
        },
    );
    assert!(
        errors[0].contains("peer 0 is not another rank"),
        "{}",
        errors[0]
    );
    assert!(
        errors[0].contains("peer 2 is not another rank"),
        "{}",
        errors[0]
    );
    assert!(
        errors[0].contains("every rank passes the same length"),
        "{}",
        errors[0]
    );
}

#[test]
fn neighbours_must_list_each_other() {
    let errors: Vec<Option<String>> = rank_results(
        Context::cpu_devices(3),
        Duration::from_secs(5),
        |ctx, comm| {
            let stream = Stream::new(ctx).unwrap();
            // Rank 0 lists rank 2, which lists only rank 1.
            let peers: &[usize] = match comm.rank() {
                0 => &[2],
                1 => &[2],
                _ => &[1],
            };
            Window::<f32>::new(comm, &stream, 4, peers)
                .err()
                .map(|e| e.to_string())
        },
    );
    // Every rank refuses, so none waits for the others.
    for err in &errors {
        let err = err.as_deref().expect("every rank is refused");
        assert!(
            err.contains("rank 0 lists rank 2 as a peer, but rank 2 lists [1]"),
            "{err}"
        );
    }
}

/// The exchange inside a `gpu_pipeline!` step (a `call` whose function stores into the
/// neighbours' windows and signals through its `TypedStream`): captured and replayed with a
/// setter between replays, then run eagerly, on 2 and 3 ranks; no race.
#[test]
fn a_pipeline_step_exchanges_through_windows_in_a_call() {
    for size in [2, 3] {
        let (n, steps) = (8, 5);
        let results: Vec<_> = each_rank(
            Context::cpu_checked_devices(size),
            Duration::from_secs(20),
            |ctx, comm| onesided::pipeline_rank(ctx, comm, n, steps),
        );
        for (rank, (seen, ctx)) in results.into_iter().enumerate() {
            let (replayed, eager) = seen.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
            let want = |offset| onesided::pipeline_halos(rank, size, n, offset);
            assert_eq!(replayed, want(steps - 1), "rank {rank} of {size}, replayed");
            assert_eq!(eager, want(steps), "rank {rank} of {size}, eager");
            assert!(ctx.races().is_empty(), "{:?}", ctx.races());
        }
    }
}

/// Simulated ranks on contexts made one by one (not `cpu_checked_devices`) cannot share
/// windows: every rank is refused with an error that says what to make instead.
#[test]
fn ranks_on_contexts_not_made_together_are_refused() {
    let comms = Communicator::cpu_ranks_with_timeout(2, Duration::from_secs(5)).unwrap();
    let errors: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                scope.spawn(move || {
                    let ctx = Context::cpu_checked();
                    let stream = Stream::new(&ctx).unwrap();
                    let other = 1 - comm.rank();
                    Window::<f32>::new(&comm, &stream, 4, &[other])
                        .unwrap_err()
                        .to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for err in &errors {
        assert!(err.contains("Context::cpu_checked_devices(n)"), "{err}");
    }
}

/// The exchange in the language (`RingStep`: `halos[..] on rank r` arguments, the signals
/// derived by the macro): captured and replayed with a setter between replays, then run
/// eagerly, on rings of 2 (both neighbours one rank), 3 and 4 ranks; no race.
#[test]
fn a_pipeline_derives_the_window_signals_and_replays_them() {
    for size in [2, 3, 4] {
        let (n, steps) = (8, 5);
        let results: Vec<_> = each_rank(
            Context::cpu_checked_devices(size),
            Duration::from_secs(20),
            |ctx, comm| onesided::ring_rank(ctx, comm, n, steps, false),
        );
        for (rank, (seen, ctx)) in results.into_iter().enumerate() {
            let (replayed, eager) = seen.unwrap_or_else(|e| panic!("rank {rank} of {size}: {e}"));
            let want = |offset| onesided::ring_halos(rank, size, n, offset);
            assert_eq!(replayed, want(steps - 1), "rank {rank} of {size}, replayed");
            assert_eq!(eager, want(steps), "rank {rank} of {size}, eager");
            assert!(ctx.races().is_empty(), "{:?}", ctx.races());
        }
    }
}

/// The same replays as launches of the lent instantiation on two streams in turn: each waits
/// for the graph's launch before it (as `cuGraphLaunch` orders them), and the checked backend
/// sees that order when it orders the window's signals node by node; no race.
#[test]
fn replays_of_a_window_step_on_two_streams_in_turn_are_ordered() {
    for size in [2, 3] {
        let (n, steps) = (8, 4);
        let results: Vec<_> = each_rank(
            Context::cpu_checked_devices(size),
            Duration::from_secs(20),
            |ctx, comm| onesided::ring_rank(ctx, comm, n, steps, true),
        );
        for (rank, (seen, ctx)) in results.into_iter().enumerate() {
            let (replayed, _) = seen.unwrap_or_else(|e| panic!("rank {rank} of {size}: {e}"));
            assert_eq!(replayed, onesided::ring_halos(rank, size, n, steps - 1));
            assert!(
                ctx.races().is_empty(),
                "rank {rank} of {size}: {:?}",
                ctx.races()
            );
        }
    }
}

/// A step that reads its window before it writes the neighbours' (`RingReadFirst`): the first
/// replay reads what each rank set in its own window (marked written), each later step what
/// the neighbours stored in the step before, on rings of 2 and 3 ranks; no race.
#[test]
fn a_step_that_reads_first_starts_from_the_marked_window() {
    for size in [2, 3] {
        let (n, steps) = (8, 4);
        let results: Vec<_> = each_rank(
            Context::cpu_checked_devices(size),
            Duration::from_secs(20),
            |ctx, comm| onesided::ring_read_first_rank(ctx, comm, n, steps, true),
        );
        for (rank, (seen, ctx)) in results.into_iter().enumerate() {
            let [first, replayed, eager] =
                seen.unwrap_or_else(|e| panic!("rank {rank} of {size}: {e}"));
            let want = |offset| onesided::ring_halos(rank, size, n, offset);
            assert_eq!(
                first,
                vec![-1.0; 2 * n],
                "rank {rank} of {size}, first replay"
            );
            assert_eq!(
                replayed,
                want(steps - 2),
                "rank {rank} of {size}, last replay"
            );
            assert_eq!(eager, want(steps - 1), "rank {rank} of {size}, eager");
            assert!(ctx.races().is_empty(), "{:?}", ctx.races());
        }
    }
}

/// The same step without `Window::mark_written`: refused on every rank before its first
/// signal, with an error that says to mark the window (rather than every rank waiting for
/// writes that never come).
#[test]
fn a_step_that_reads_an_unmarked_window_first_is_refused() {
    let errors: Vec<String> = rank_results(
        Context::cpu_checked_devices(2),
        Duration::from_secs(5),
        |ctx, comm| {
            onesided::ring_read_first_rank(ctx, comm, 4, 2, false)
                .unwrap_err()
                .to_string()
        },
    );
    for err in &errors {
        assert!(
            err.contains("reads window `halos` before it writes it")
                && err.contains("halos.mark_written(&stream)"),
            "{err}"
        );
    }
}

/// A step whose launch would leave a peer of the window unwritten (both parts into the rank
/// above, on a ring of 3) or write a rank that is no peer: refused on every rank before any
/// signal of the step is posted, naming the pipeline, the window and the ranks (no rank waits
/// for a write that never comes).
#[test]
fn a_step_that_leaves_a_peer_unwritten_is_refused_before_any_signal() {
    for (targets, wanted) in [
        (
            (|r: usize| ((r + 2) % 3, (r + 2) % 3)) as fn(usize) -> (usize, usize),
            "but not on its peers",
        ),
        (
            |r: usize| (r, (r + 1) % 3),
            "which is not one of its window peers",
        ),
    ] {
        let errors: Vec<String> = rank_results(
            Context::cpu_checked_devices(3),
            Duration::from_secs(5),
            |ctx, comm| {
                let ends = targets(comm.rank());
                onesided::ring_step_with(ctx, comm, 4, ends)
                    .unwrap_err()
                    .to_string()
            },
        );
        for err in &errors {
            assert!(
                err.contains("RingStep") && err.contains("window `halos`") && err.contains(wanted),
                "{err}"
            );
        }
    }
}

/// Parts at params (`RingStepAt`): apart, the ring of three exchanges as `RingStep` does;
/// overlapping, each rank's part would be written by both its neighbours at once (on three
/// ranks) or twice by its one neighbour (on two), so the step is refused on every rank before
/// any signal, naming both parts (it raced on three ranks before).
#[test]
fn overlapping_parts_on_two_neighbours_are_refused_on_every_rank() {
    let n = 4;
    for captured in [false, true] {
        let seen: Vec<_> = each_rank(
            Context::cpu_checked_devices(3),
            Duration::from_secs(10),
            |ctx, comm| onesided::ring_step_at(ctx, comm, n, (n, 0), captured),
        );
        for (rank, (halos, ctx)) in seen.into_iter().enumerate() {
            let halos = halos.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
            assert_eq!(halos, onesided::ring_halos(rank, 3, n, 0), "rank {rank}");
            assert!(ctx.races().is_empty(), "{:?}", ctx.races());
        }
    }
    for (size, wanted, captured) in [
        (3, "which overlap: every rank runs the launch", false),
        (3, "which overlap: every rank runs the launch", true),
        (2, "(the two neighbours are one rank here)", false),
    ] {
        let results: Vec<_> = each_rank(
            Context::cpu_checked_devices(size),
            Duration::from_secs(5),
            |ctx, comm| onesided::ring_step_at(ctx, comm, n, (1, 2), captured),
        );
        for (rank, (result, ctx)) in results.into_iter().enumerate() {
            let err = result.unwrap_err().to_string();
            assert!(
                err.contains("RingStepAt")
                    && err.contains("1..5")
                    && err.contains("2..6")
                    && err.contains(wanted),
                "rank {rank} of {size} (captured: {captured}): {err}"
            );
            assert!(ctx.races().is_empty(), "{:?}", ctx.races());
        }
    }
}
