//! The forms the compile-time pairing rule suggests run on simulated CPU ranks: a send and
//! its recv next to each other in one stage (one group), also with the statement that split
//! them moved after both, and the stage that held the recv folded into the one that sends.
//! A pipeline of ranks whose groups pair across loops over params (the first rank receives
//! nothing, the last sends nothing), which the rule leaves to run time, runs too, and so do two
//! pipelines that are the two roles of one exchange (one only sends, the other only receives).

use std::time::Duration;

use gpu_pipeline::{Communicator, Context, DeviceBuffer, Stream, gpu_pipeline};

gpu_pipeline! {
    /// Shifts the first half of `x` one rank up into the second half, then clears `y`: the
    /// `fill` that split the group in two now comes after it.
    pub pipeline Shift {
        streams { main }
        params {
            comm: &Communicator,
            up: usize,
            down: usize,
            x: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
        }
        stage a on main {
            send x[0..4] to up;
            recv x[4..8] from down;
            fill y = 0.0f32;
        }
    }
}

gpu_pipeline! {
    /// Sends `x` up and receives `y` from below in the one stage that held the send.
    pub pipeline Swap {
        streams { main, side }
        params {
            comm: &Communicator,
            up: usize,
            down: usize,
            x: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
        }
        stage out on main {
            send x to up;
            recv y from down;
        }
        stage after_it on side { fill x = -1.0f32; }
    }
}

gpu_pipeline! {
    /// A relay: each rank receives `x` from the rank before it (`recvs` times: none on the
    /// first) and passes it to the rank after it (`sends` times: none on the last).
    pub pipeline Relay {
        streams { main }
        params {
            comm: &Communicator,
            prev: usize,
            next: usize,
            recvs: usize,
            sends: usize,
            x: &mut DeviceBuffer<f32>,
        }
        for time in 0..recvs {
            stage inn on main { recv x from prev; }
        }
        for time in 0..sends {
            stage out on main { send x to next; }
        }
    }
}

gpu_pipeline! {
    /// One role of a split model: computes `x` and sends it to `peer`.
    pub pipeline Produce {
        streams { main }
        params { comm: &Communicator, peer: usize, x: &mut DeviceBuffer<f32> }
        stage compute on main { fill x = 7.0f32; }
        stage out on main { send x to peer; }
    }
}

gpu_pipeline! {
    /// The other role: receives `y` from `peer`.
    pub pipeline Consume {
        streams { main }
        params { comm: &Communicator, peer: usize, y: &mut DeviceBuffer<f32> }
        stage inn on main { recv y from peer; }
    }
}

/// Runs `rank` on `size` simulated ranks, each with its own checked CPU context; a rank that
/// waits for a peer that never comes fails at the deadline instead of hanging.
fn on_ranks(size: usize, rank: impl Fn(&Context, &Communicator) + Sync) {
    let ranks = Communicator::cpu_ranks_with_timeout(size, Duration::from_secs(10)).unwrap();
    let rank = &rank;
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|comm| scope.spawn(move || rank(&Context::cpu_checked(), &comm)))
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    });
}

/// This rank's neighbours on a ring: the rank above and the rank below.
fn neighbours(comm: &Communicator) -> (usize, usize) {
    let (rank, size) = (comm.rank(), comm.size());
    ((rank + 1) % size, (rank + size - 1) % size)
}

#[test]
fn a_send_and_its_recv_in_one_group_run_on_two_and_three_ranks() {
    for size in [2, 3] {
        on_ranks(size, |ctx, comm| {
            let stream = Stream::new(ctx).unwrap();
            let (up, down) = neighbours(comm);
            let me = comm.rank() as f32;
            let mut x = DeviceBuffer::from_slice(&stream, &[me; 8]).unwrap();
            let mut y = DeviceBuffer::from_slice(&stream, &[me; 8]).unwrap();
            stream.synchronize().unwrap();
            let params = ShiftParams {
                comm,
                up,
                down,
                x: &mut x,
                y: &mut y,
            };
            Shift::new(ctx)
                .unwrap()
                .run(params)
                .unwrap()
                .wait()
                .unwrap();
            let mut want = vec![me; 4];
            want.extend([down as f32; 4]);
            assert_eq!(x.to_vec(&stream).unwrap(), want);
            assert_eq!(y.to_vec(&stream).unwrap(), [0.0; 8]);
            assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
        });
    }
}

#[test]
fn a_recv_moved_into_the_sending_stage_runs_eagerly_and_replayed() {
    on_ranks(3, |ctx, comm| {
        let stream = Stream::new(ctx).unwrap();
        let (up, down) = neighbours(comm);
        let me = comm.rank() as f32;
        let mut x = DeviceBuffer::from_slice(&stream, &[me; 4]).unwrap();
        let mut y = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
        stream.synchronize().unwrap();
        let mut swap = Swap::new(ctx).unwrap();
        let params = SwapParams {
            comm,
            up,
            down,
            x: &mut x,
            y: &mut y,
        };
        swap.run(params).unwrap().wait().unwrap();
        assert_eq!(y.to_vec(&stream).unwrap(), [down as f32; 4]);
        assert_eq!(x.to_vec(&stream).unwrap(), [-1.0; 4]);
        // Replayed, it receives what the rank below left in its `x` after the first step.
        let mut graph = swap
            .capture(SwapParams {
                comm,
                up,
                down,
                x: &mut x,
                y: &mut y,
            })
            .unwrap();
        graph.launch().unwrap();
        graph.synchronize().unwrap();
        drop(graph);
        assert_eq!(y.to_vec(&stream).unwrap(), [-1.0; 4]);
        assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    });
}

#[test]
fn a_relay_pairs_groups_across_loops_whose_counts_differ_by_rank() {
    on_ranks(3, |ctx, comm| {
        let stream = Stream::new(ctx).unwrap();
        let (rank, last) = (comm.rank(), comm.size() - 1);
        let start = if rank == 0 { 42.0f32 } else { 0.0 };
        let mut x = DeviceBuffer::from_slice(&stream, &[start; 4]).unwrap();
        stream.synchronize().unwrap();
        let params = RelayParams {
            comm,
            prev: rank.saturating_sub(1),
            next: (rank + 1).min(last),
            recvs: usize::from(rank > 0),
            sends: usize::from(rank < last),
            x: &mut x,
        };
        Relay::new(ctx)
            .unwrap()
            .run(params)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(x.to_vec(&stream).unwrap(), [42.0; 4]);
        assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    });
}

#[test]
fn a_producer_and_a_consumer_pipeline_pair_across_ranks() {
    on_ranks(2, |ctx, comm| {
        let stream = Stream::new(ctx).unwrap();
        let mut buffer = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
        stream.synchronize().unwrap();
        let peer = 1 - comm.rank();
        let run = if comm.rank() == 0 {
            let params = ProduceParams {
                comm,
                peer,
                x: &mut buffer,
            };
            Produce::new(ctx)
                .unwrap()
                .run(params)
                .and_then(|r| r.wait())
        } else {
            let params = ConsumeParams {
                comm,
                peer,
                y: &mut buffer,
            };
            Consume::new(ctx)
                .unwrap()
                .run(params)
                .and_then(|r| r.wait())
        };
        run.unwrap();
        assert_eq!(buffer.to_vec(&stream).unwrap(), [7.0; 4]);
        assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    });
}
