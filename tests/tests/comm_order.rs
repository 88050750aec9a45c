//! One rank's communication pairs with the other ranks' in the order it was enqueued, whatever
//! the streams, as NCCL pairs a communicator's operations in issue order: two pipelines that share a
//! communicator and run one after the other without a wait pair each collective with the
//! same one on every rank, even when one rank reaches its first one later (CPU backend). A
//! replay of a captured step takes its place when it is launched, as an eager step does when
//! it is enqueued.

use std::time::Duration;

use gpu_pipeline::{Communicator, Context, DeviceBuffer, Result, Stream, gpu_pipeline};

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
