//! One rank's communication pairs with the other ranks' in the order it was enqueued, whatever
//! the streams, as NCCL pairs a communicator's operations in issue order: two pipelines that share a
//! communicator and run one after the other without a wait pair each collective with the
//! same one on every rank, even when one rank reaches its first one later (CPU backend). A
//! replay of a captured step takes its place when it is launched, as an eager step does when
//! it is enqueued.

use std::time::{Duration, Instant};

use gpu_pipeline::collective::ReduceOp;
use gpu_pipeline::{
    CaptureMode, CommStage, Communicator, Context, DeviceBuffer, Graph, Result, Stream,
    gpu_pipeline,
};

gpu_pipeline! {
    /// Sums `x` over the ranks, after a host delay.
    pub pipeline Late {
        streams { main }
        params { comm: &Communicator, delay_ms: u64, x: &mut DeviceBuffer<f32> }
        stage s on main {
            host move || std::thread::sleep(Duration::from_millis(delay_ms));
            all_reduce(sum) x;
        }
    }
}

gpu_pipeline! {
    /// Sums `y` over the ranks.
    pub pipeline Prompt {
        streams { main }
        params { comm: &Communicator, y: &mut DeviceBuffer<f32> }
        stage s on main { all_reduce(sum) y; }
    }
}

/// One rank: `Late` then `Prompt`, both enqueued before either is waited for; `x` and `y`
/// after them. Rank 0's `Late` waits 200 ms before its collective.
fn rank(rank: usize, comm: &Communicator, y_len: usize) -> Result<(Vec<f32>, Vec<f32>)> {
    let ctx = Context::cpu_checked();
    let stream = Stream::new(&ctx)?;
    let mut x = DeviceBuffer::from_slice(&stream, &[1.0f32; 2])?;
    let mut y = DeviceBuffer::from_slice(&stream, &vec![10.0f32; y_len])?;
    let (mut late, mut prompt) = (Late::new(&ctx)?, Prompt::new(&ctx)?);
    let delay_ms = if rank == 0 { 200 } else { 0 };
    let first = late.run(LateParams {
        comm,
        delay_ms,
        x: &mut x,
    })?;
    let second = prompt.run(PromptParams { comm, y: &mut y })?;
    first.wait()?;
    second.wait()?;
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    Ok((x.to_vec(&stream)?, y.to_vec(&stream)?))
}

#[test]
fn two_pipelines_sharing_a_communicator_pair_in_issue_order() {
    // Equal and different sizes: paired out of order, the first gave wrong sums and the
    // second a false mismatch.
    for y_len in [2, 3] {
        let comms = Communicator::cpu_ranks_with_timeout(2, Duration::from_secs(10)).unwrap();
        std::thread::scope(|scope| {
            let ranks: Vec<_> = comms
                .into_iter()
                .enumerate()
                .map(|(r, comm)| scope.spawn(move || rank(r, &comm, y_len)))
                .collect();
            for (r, handle) in ranks.into_iter().enumerate() {
                let (x, y) = handle.join().unwrap().unwrap();
                assert_eq!(x, [2.0; 2], "rank {r}, y of {y_len}");
                assert_eq!(y, vec![20.0; y_len], "rank {r}, y of {y_len}");
            }
        });
    }
}

/// One rank: a replay of `Late` on `x`, then an eager `Late` on `y` (issued in that order,
/// neither waited for before the other), each rank delaying the other one of them.
fn replay_then_eager(rank: usize, comm: &Communicator) -> Result<(Vec<f32>, Vec<f32>)> {
    let ctx = Context::cpu_checked();
    let stream = Stream::new(&ctx)?;
    let mut x = DeviceBuffer::from_slice(&stream, &[1.0f32; 2])?;
    let mut y = DeviceBuffer::from_slice(&stream, &[10.0f32; 2])?;
    let (mut replayed, mut eager) = (Late::new(&ctx)?, Late::new(&ctx)?);
    let (replay_delay, eager_delay) = if rank == 0 { (200, 0) } else { (0, 200) };
    {
        let mut graph = replayed.capture(LateParams {
            comm,
            delay_ms: replay_delay,
            x: &mut x,
        })?;
        graph.launch()?;
        let second = eager.run(LateParams {
            comm,
            delay_ms: eager_delay,
            x: &mut y,
        })?;
        second.wait()?;
        graph.synchronize()?;
    }
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    Ok((x.to_vec(&stream)?, y.to_vec(&stream)?))
}

#[test]
fn a_replay_pairs_in_the_order_it_was_launched() {
    let comms = Communicator::cpu_ranks_with_timeout(2, Duration::from_secs(10)).unwrap();
    std::thread::scope(|scope| {
        let ranks: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(r, comm)| scope.spawn(move || replay_then_eager(r, &comm)))
            .collect();
        for (r, handle) in ranks.into_iter().enumerate() {
            let (x, y) = handle.join().unwrap().unwrap();
            // Paired out of order, both summed 1 + 10 on both ranks.
            assert_eq!(x, [2.0; 2], "rank {r}: the replay's all_reduce");
            assert_eq!(y, [20.0; 2], "rank {r}: the eager all_reduce");
        }
    });
}

/// One all-reduce of `x` on `stream`.
fn group(comm: &Communicator, stream: &Stream, x: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut g = CommStage::new(comm, stream);
    g.all_reduce_in_place(x, .., ReduceOp::Sum)?;
    g.finish()
}

/// A child graph whose host node panics before its communication group: the group never
/// runs, and the ticket its launch took goes when the replay ends, so the rank's next eager
/// group does not wait for it until the deadline.
#[test]
fn a_group_a_failed_child_graph_skips_does_not_stall_the_next() {
    let comm = Communicator::cpu_ranks_with_timeout(1, Duration::from_secs(2))
        .unwrap()
        .remove(0);
    let ctx = Context::cpu();
    let stream = Stream::new(&ctx).unwrap();
    let mut x = DeviceBuffer::from_slice(&stream, &[1.0f32; 2]).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &[1.0f32; 2]).unwrap();
    stream.synchronize().unwrap();
    let mut child = Graph::new(&ctx).unwrap();
    let host = child
        .add_host_node(&[], || panic!("host node fails"))
        .unwrap();
    child
        .capture_into(&[host], &stream, |s| group(&comm, s, &mut x))
        .unwrap();
    let mut parent = Graph::new(&ctx).unwrap();
    parent.add_child_graph_node(&[], &child).unwrap();
    let exec = parent.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    let first = stream.synchronize();
    assert!(first.is_err(), "the host node failed");
    let started = Instant::now();
    group(&comm, &stream, &mut y).unwrap();
    let second = stream.synchronize();
    let took = started.elapsed();
    assert!(
        second.is_ok() && took < Duration::from_secs(1),
        "{took:?} {second:?}"
    );
}

/// A graph holding one group twice (a graph launched twice into a capture), launched, then an
/// eager group, then the graph again, all enqueued before the first replay runs: each run
/// takes its own launch's turn or none, never a later launch's (which would wait for the
/// eager group queued behind it until the deadline). `as_child` puts the graph in a child
/// graph node, whose two copies of the group share one launch hook (one ticket a launch).
fn one_group_twice_then_eager(as_child: bool) {
    let comm = Communicator::cpu_ranks_with_timeout(1, Duration::from_secs(2))
        .unwrap()
        .remove(0);
    let ctx = Context::cpu();
    let stream = Stream::new(&ctx).unwrap();
    let mut x = DeviceBuffer::from_slice(&stream, &[1.0f32; 2]).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &[1.0f32; 2]).unwrap();
    stream.synchronize().unwrap();
    let g = stream
        .capture(CaptureMode::ThreadLocal, |s| group(&comm, s, &mut x))
        .unwrap();
    let g_exec = g.instantiate().unwrap();
    let twice = stream
        .capture(CaptureMode::ThreadLocal, |s| {
            g_exec.launch(s)?;
            g_exec.launch(s)
        })
        .unwrap();
    let exec = if as_child {
        let mut parent = Graph::new(&ctx).unwrap();
        parent.add_child_graph_node(&[], &twice).unwrap();
        parent.instantiate().unwrap()
    } else {
        twice.instantiate().unwrap()
    };
    stream
        .launch_host_func(|| std::thread::sleep(Duration::from_millis(200)))
        .unwrap();
    let started = Instant::now();
    exec.launch(&stream).unwrap();
    group(&comm, &stream, &mut y).unwrap();
    exec.launch(&stream).unwrap();
    let done = stream.synchronize();
    let took = started.elapsed();
    assert!(
        done.is_ok() && took < Duration::from_secs(1),
        "{took:?} {done:?}"
    );
}

#[test]
fn a_child_graph_holding_one_group_twice_takes_no_later_launchs_turn() {
    one_group_twice_then_eager(true);
}

#[test]
fn a_graph_holding_one_group_twice_runs_both_in_turn() {
    one_group_twice_then_eager(false);
}
