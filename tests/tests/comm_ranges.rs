//! A communication operand's range is the elements it touches, on the CPU backend with two
//! ranks: a `recv t[0..nx]` writes those elements of a scratch buffer and no more, so a copy of
//! all of it is refused when the step is planned (before anything is enqueued, so neither rank
//! waits for the other); and a stage on another stream that touches other elements of a buffer
//! a `send` reads runs beside it, with no race.

use gpu_pipeline::{
    Communicator, Context, DeviceBuffer, PinnedBuffer, Result, Stream, gpu_pipeline,
};

gpu_pipeline! {
    /// Receives the peer's `x[0..nx]` into the first half of `t` and copies all of `t` out:
    /// the second half of `t` is never written.
    pub pipeline HalfReceived {
        streams { main }
        params {
            comm: &Communicator,
            nx: usize,
            peer: usize,
            x: &DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        scratch { t: DeviceBuffer<f32> = 2 * nx }
        stage exchange on main {
            send x[0..nx] to peer;
            recv t[0..nx] from peer;
        }
        stage report on main { copy t -> out; }
    }
}

gpu_pipeline! {
    /// The same, with the second half of `t` filled: every element of `t` is written before
    /// the copy.
    pub pipeline Received {
        streams { main }
        params {
            comm: &Communicator,
            nx: usize,
            peer: usize,
            x: &DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        scratch { t: DeviceBuffer<f32> = 2 * nx }
        stage exchange on main {
            send x[0..nx] to peer;
            recv t[0..nx] from peer;
        }
        stage rest on main { fill t[nx..2 * nx] = -1.0; }
        stage report on main { copy t -> out; }
    }
}

gpu_pipeline! {
    /// Sends the first half of `a` while another stream fills its second half: the two touch
    /// disjoint elements, so they are not ordered.
    pub pipeline SendBeside {
        streams { main, side }
        params {
            comm: &Communicator,
            nx: usize,
            peer: usize,
            a: &mut DeviceBuffer<f32>,
            b: &mut DeviceBuffer<f32>,
        }
        stage exchange on main {
            send a[0..nx] to peer;
            recv b[0..nx] from peer;
        }
        stage refill on side { fill a[nx..2 * nx] = 7.0; }
    }
}

/// Runs `rank` on two CPU ranks and returns what each returned, in rank order.
fn two_ranks<T: Send>(rank: impl Fn(usize, &Communicator) -> T + Sync) -> Vec<T> {
    tests::cpu_ranks::on_cpu_ranks(2, rank)
}

const NX: usize = 4;

/// Rank `r`'s `x`: `r * 10 + i`.
fn x_of(r: usize) -> Vec<f32> {
    (0..NX).map(|i| (r * 10 + i) as f32).collect()
}

/// Runs pipeline `$pipeline` (params `$params`: `comm`, `nx`, `peer`, `x`, `out`) once on
/// rank `$r` of `$comm`, on a checked CPU context of its own, with `x = x_of(r)` and `out`
/// 2 * NX zeros; any race fails the rank. `out` after the step, or the step's error.
macro_rules! exchange_on_rank {
    ($pipeline:ident, $params:ident, $r:expr, $comm:expr) => {
        (|| -> Result<Vec<f32>> {
            let ctx = Context::cpu_checked();
            let stream = Stream::new(&ctx)?;
            let x = DeviceBuffer::from_slice(&stream, &x_of($r))?;
            let mut out = PinnedBuffer::<f32>::zeros(&ctx, 2 * NX)?;
            stream.synchronize()?;
            let mut pipeline = $pipeline::new(&ctx)?;
            pipeline
                .run($params {
                    comm: $comm,
                    nx: NX,
                    peer: 1 - $r,
                    x: &x,
                    out: &mut out,
                })?
                .wait()?;
            assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
            out.to_vec()
        })()
    };
}

/// Each rank's step was refused, naming `t` and its elements 4..8, which nothing wrote.
fn assert_refused_for_t_4_8(results: Vec<Result<Vec<f32>>>) {
    for (r, result) in results.into_iter().enumerate() {
        let message = match result {
            Err(e) => e.to_string(),
            Ok(_) => panic!("rank {r}: the step ran and copied undefined elements"),
        };
        assert!(
            message.contains("`t`") && message.contains("4..8"),
            "rank {r}: {message}"
        );
    }
}

#[test]
fn a_copy_of_a_scratch_buffer_only_partly_received_is_refused_when_planned() {
    let results = two_ranks(|r, comm| exchange_on_rank!(HalfReceived, HalfReceivedParams, r, comm));
    assert_refused_for_t_4_8(results);
}

#[test]
fn a_scratch_buffer_received_in_part_and_filled_in_part_is_copied_whole() {
    let results = two_ranks(|r, comm| exchange_on_rank!(Received, ReceivedParams, r, comm));
    for (r, out) in results.into_iter().enumerate() {
        let mut expected = x_of(1 - r);
        expected.extend([-1.0; NX]);
        assert_eq!(out.unwrap(), expected, "rank {r}");
    }
}

#[test]
fn a_send_of_one_range_runs_beside_a_fill_of_another_without_a_race() {
    let results = two_ranks(|r, comm| -> Result<(Vec<f32>, Vec<f32>)> {
        let ctx = Context::cpu_checked();
        let stream = Stream::new(&ctx)?;
        let mut start = x_of(r);
        start.extend([0.0; NX]);
        let mut a = DeviceBuffer::from_slice(&stream, &start)?;
        let mut b = DeviceBuffer::<f32>::zeros(&stream, NX)?;
        stream.synchronize()?;
        let mut pipeline = SendBeside::new(&ctx)?;
        pipeline
            .run(SendBesideParams {
                comm,
                nx: NX,
                peer: 1 - r,
                a: &mut a,
                b: &mut b,
            })?
            .wait()?;
        assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
        Ok((a.to_vec(&stream)?, b.to_vec(&stream)?))
    });
    for (r, result) in results.into_iter().enumerate() {
        let (a, b) = result.unwrap();
        let mut expected = x_of(r);
        expected.extend([7.0; NX]);
        assert_eq!(a, expected, "rank {r}: a");
        assert_eq!(b, x_of(1 - r), "rank {r}: b");
    }
}

gpu_pipeline! {
    /// Gathers every rank's `x[0..nx]` into the front of `all`, whose length depends on the
    /// communicator's size (a range the step's plan evaluates with the communicator's size).
    pub pipeline Gather {
        streams { main }
        params {
            comm: &Communicator,
            nx: usize,
            x: &DeviceBuffer<f32>,
            all: &mut DeviceBuffer<f32>,
        }
        stage gather on main { all_gather x[0..nx] -> all[0..comm.size() * nx]; }
    }
}

#[test]
fn a_range_over_the_communicators_size_is_planned_and_gathered() {
    let results = two_ranks(|r, comm| -> Result<Vec<f32>> {
        let ctx = Context::cpu_checked();
        let stream = Stream::new(&ctx)?;
        let x = DeviceBuffer::from_slice(&stream, &x_of(r))?;
        let mut all = DeviceBuffer::from_slice(&stream, &[-1.0f32; 3 * NX])?;
        stream.synchronize()?;
        let mut pipeline = Gather::new(&ctx)?;
        pipeline
            .run(GatherParams {
                comm,
                nx: NX,
                x: &x,
                all: &mut all,
            })?
            .wait()?;
        assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
        all.to_vec(&stream)
    });
    for (r, all) in results.into_iter().enumerate() {
        let mut expected = x_of(0);
        expected.extend(x_of(1));
        expected.extend([-1.0; NX]);
        assert_eq!(all.unwrap(), expected, "rank {r}");
    }
}

gpu_pipeline! {
    /// Receives the peer's `x` in `parts` pieces of `nx` elements, one stage instance each,
    /// into the front of `t` (of `2 * nx` elements), then copies all of `t` out: two parts
    /// write all of it, one leaves its second half unwritten.
    pub pipeline InParts {
        streams { main, copy }
        params {
            comm: &Communicator,
            nx: usize,
            parts: usize,
            peer: usize,
            x: &DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        scratch { t: DeviceBuffer<f32> = 2 * nx }
        for j in 0..parts {
            stage part on main {
                send x[j * nx..(j + 1) * nx] to peer;
                recv t[j * nx..(j + 1) * nx] from peer;
            }
        }
        stage report on copy { copy t -> out; }
    }
}

#[test]
fn pieces_received_in_a_loop_count_element_by_element() {
    let results = two_ranks(|r, comm| {
        let run = |parts: usize| -> Result<Vec<f32>> {
            let ctx = Context::cpu_checked();
            let stream = Stream::new(&ctx)?;
            let mut both = x_of(r);
            both.extend(x_of(r + 2));
            let x = DeviceBuffer::from_slice(&stream, &both)?;
            let mut out = PinnedBuffer::<f32>::zeros(&ctx, 2 * NX)?;
            stream.synchronize()?;
            let mut pipeline = InParts::new(&ctx)?;
            pipeline
                .run(InPartsParams {
                    comm,
                    nx: NX,
                    parts,
                    peer: 1 - r,
                    x: &x,
                    out: &mut out,
                })?
                .wait()?;
            assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
            out.to_vec()
        };
        (run(2), run(1).map_err(|e| e.to_string()))
    });
    for (r, (whole, half)) in results.into_iter().enumerate() {
        let mut expected = x_of(1 - r);
        expected.extend(x_of(1 - r + 2));
        assert_eq!(whole.unwrap(), expected, "rank {r}: two parts");
        let message = half.expect_err("one part leaves t[4..8] unwritten");
        assert!(
            message.contains("`t`") && message.contains("4..8"),
            "rank {r}: {message}"
        );
    }
}

gpu_pipeline! {
    /// Copies `x[0..nx]` into the front of a scratch `t` of `2 * nx` elements, sums `t[0..m]`
    /// over the ranks in place, and copies the front out: with `m = 2 * nx` the in-place sum
    /// reads `t[nx..2 * nx]`, which nothing wrote.
    pub pipeline SumInPlace {
        streams { main }
        params {
            comm: &Communicator,
            nx: usize,
            m: usize,
            x: &DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        scratch { t: DeviceBuffer<f32> = 2 * nx }
        stage sum on main {
            copy x[0..nx] -> t[0..nx];
            all_reduce(sum) t[0..m];
            copy t[0..nx] -> out;
        }
    }
}

#[test]
fn an_in_place_sum_reads_its_whole_range_first() {
    let results = two_ranks(|r, comm| {
        let run = |m: usize| -> Result<Vec<f32>> {
            let ctx = Context::cpu_checked();
            let stream = Stream::new(&ctx)?;
            let x = DeviceBuffer::from_slice(&stream, &x_of(r))?;
            let mut out = PinnedBuffer::<f32>::zeros(&ctx, NX)?;
            stream.synchronize()?;
            let mut pipeline = SumInPlace::new(&ctx)?;
            pipeline
                .run(SumInPlaceParams {
                    comm,
                    nx: NX,
                    m,
                    x: &x,
                    out: &mut out,
                })?
                .wait()?;
            assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
            out.to_vec()
        };
        (run(NX), run(2 * NX).map_err(|e| e.to_string()))
    });
    for (r, (summed, past)) in results.into_iter().enumerate() {
        let expected: Vec<f32> = x_of(0).iter().zip(x_of(1)).map(|(a, b)| a + b).collect();
        assert_eq!(
            summed.unwrap(),
            expected,
            "rank {r}: the written front summed"
        );
        let message = past.expect_err("the sum of t[0..8] reads t[4..8], never written");
        assert!(
            message.contains("`t`") && message.contains("4..8"),
            "rank {r}: {message}"
        );
    }
}

gpu_pipeline! {
    /// `HalfReceived` with a `..=` range: `recv t[0..=nx - 1]` writes the same first half of
    /// `t`, and no more.
    pub pipeline HalfReceivedClosed {
        streams { main }
        params {
            comm: &Communicator,
            nx: usize,
            peer: usize,
            x: &DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        scratch { t: DeviceBuffer<f32> = 2 * nx }
        stage exchange on main {
            send x[0..=nx - 1] to peer;
            recv t[0..=nx - 1] from peer;
        }
        stage report on main { copy t -> out; }
    }
}

/// A `..=` range counted as the whole buffer, so the copy of all of `t` ran and copied four
/// undefined elements; it is the elements it names, and the plan refuses the copy.
#[test]
fn a_closed_range_received_into_part_of_a_scratch_buffer_is_refused_when_planned() {
    let results = two_ranks(|r, comm| {
        exchange_on_rank!(HalfReceivedClosed, HalfReceivedClosedParams, r, comm)
    });
    assert_refused_for_t_4_8(results);
}

gpu_pipeline! {
    /// Exchanges `x[0..=hi]` into `t[0..=hi]`: `hi` may be any `usize`.
    pub pipeline ClosedExchange {
        streams { main }
        params {
            comm: &Communicator,
            hi: usize,
            peer: usize,
            x: &DeviceBuffer<f32>,
            t: &mut DeviceBuffer<f32>,
        }
        stage exchange on main {
            send x[0..=hi] to peer;
            recv t[0..=hi] from peer;
        }
    }
}

#[test]
fn a_closed_range_ending_at_the_largest_usize_is_refused_not_overflowed() {
    let results = two_ranks(|r, comm| -> Result<()> {
        let ctx = Context::cpu_checked();
        let stream = Stream::new(&ctx)?;
        let x = DeviceBuffer::from_slice(&stream, &x_of(r))?;
        let mut t = DeviceBuffer::<f32>::zeros(&stream, NX)?;
        stream.synchronize()?;
        let mut pipeline = ClosedExchange::new(&ctx)?;
        pipeline
            .run(ClosedExchangeParams {
                comm,
                hi: usize::MAX,
                peer: 1 - r,
                x: &x,
                t: &mut t,
            })?
            .wait()
    });
    for (r, result) in results.into_iter().enumerate() {
        let message = result
            .expect_err("elements 0..=usize::MAX of a 4-element buffer")
            .to_string();
        assert!(message.contains("which holds 4"), "rank {r}: {message}");
    }
}
