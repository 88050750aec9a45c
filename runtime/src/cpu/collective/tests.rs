//! The CPU collectives against NCCL's meaning: results, matching, deadlines, departures.

use super::*;
use proptest::prelude::*;

const SHORT: Duration = Duration::from_millis(300);

/// Runs `f` on `size` ranks and unwraps every rank's result.
fn run_ok<R: Send + fmt::Debug>(size: usize, f: impl Fn(Comm) -> Result<R> + Sync) -> Vec<R> {
    World::run(size, f)
        .expect("no rank panicked")
        .into_iter()
        .enumerate()
        .map(|(rank, r)| r.unwrap_or_else(|e| panic!("rank {rank}: {e}")))
        .collect()
}

#[test]
fn all_reduce_sums_every_rank_in_worlds_of_one_two_and_four() {
    for size in [1, 2, 4] {
        let out = run_ok(size, |comm| {
            let mine: Vec<i32> = (0..5).map(|i| i * 10 + comm.rank() as i32).collect();
            let mut sum = vec![0; 5];
            comm.all_reduce(&mine, &mut sum, ReduceOp::Sum)?;
            Ok(sum)
        });
        let ranks: i32 = (0..size as i32).sum();
        let expected: Vec<i32> = (0..5).map(|i| i * 10 * size as i32 + ranks).collect();
        assert!(out.iter().all(|r| *r == expected), "{size}: {out:?}");
    }
}

#[test]
fn every_operator_reduces_as_its_name_says() {
    let out = run_ok(3, |comm| {
        let x = [comm.rank() as f64 + 1.0, -(comm.rank() as f64)];
        let mut results = Vec::new();
        for op in ReduceOp::ALL {
            let mut r = [0.0; 2];
            comm.all_reduce(&x, &mut r, op)?;
            results.push(r);
        }
        Ok(results)
    });
    let expected = [
        [6.0, -3.0], // sum of 1,2,3 and 0,-1,-2
        [6.0, -0.0], // product
        [3.0, 0.0],  // max
        [1.0, -2.0], // min
        [2.0, -1.0], // avg
    ];
    for r in &out {
        assert_eq!(r.as_slice(), expected.as_slice());
    }
}

#[test]
fn integer_sums_wrap_like_the_gpu() {
    let out = run_ok(2, |comm| {
        let mut x = [200u8, 255];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        Ok(x)
    });
    assert_eq!(out, vec![[144, 254]; 2]);
}

#[test]
fn broadcast_all_gather_and_reduce_scatter_on_four_ranks() {
    let out = run_ok(4, |comm| {
        let rank = comm.rank() as u32;
        let mut b = [rank; 3];
        comm.broadcast(2, &mut b)?;
        let mut gathered = [0u32; 8];
        comm.all_gather(&[rank, rank * 100], &mut gathered)?;
        let send: Vec<i64> = (0..8).map(|i| i as i64 * (rank as i64 + 1)).collect();
        let mut share = [0i64; 2];
        comm.reduce_scatter(&send, &mut share, ReduceOp::Sum)?;
        let mut from = [0u32; 2];
        comm.broadcast_from(1, &[7, 8], &mut from)?;
        Ok((b, gathered, share, from))
    });
    for (rank, (b, gathered, share, from)) in out.into_iter().enumerate() {
        assert_eq!(b, [2; 3]);
        assert_eq!(gathered, [0, 0, 1, 100, 2, 200, 3, 300]);
        // Sum over ranks of i * (r + 1) = i * 10, for this rank's two elements.
        let i = 2 * rank as i64;
        assert_eq!(share, [i * 10, (i + 1) * 10], "rank {rank}");
        assert_eq!(from, [7, 8]);
    }
}

#[test]
fn sends_match_recvs_by_peer_and_order() {
    let out = run_ok(3, |comm| {
        let (rank, size) = (comm.rank(), comm.size());
        let next = (rank + 1) % size;
        let prev = (rank + size - 1) % size;
        // Rank 0 sends first and the others receive first, so the blocking sends of the
        // ring 0 -> 1 -> 2 -> 0 complete one after the other.
        let mut got = Vec::new();
        if rank == 0 {
            comm.send(next, &[rank as u8; 1])?;
            comm.send(next, &[rank as u8; 3])?;
            let (mut a, mut b) = ([0u8; 1], [0u8; 3]);
            comm.recv(prev, &mut a)?;
            comm.recv(prev, &mut b)?;
            got.extend(a);
            got.extend(b);
        } else {
            let (mut a, mut b) = ([0u8; 1], [0u8; 3]);
            comm.recv(prev, &mut a)?;
            comm.recv(prev, &mut b)?;
            comm.send(next, &[rank as u8; 1])?;
            comm.send(next, &[rank as u8 + 10; 3])?;
            got.extend(a);
            got.extend(b);
        }
        Ok(got)
    });
    assert_eq!(out[1], [0, 0, 0, 0]);
    assert_eq!(out[2], [1, 11, 11, 11]);
    assert_eq!(out[0], [2, 12, 12, 12]);
}

#[test]
fn a_grouped_halo_exchange_needs_no_ordering() {
    let out = run_ok(4, |comm| {
        let (rank, size) = (comm.rank(), comm.size());
        let (up, down) = ((rank + size - 1) % size, (rank + 1) % size);
        let first = [rank as f32; 8];
        let last = [rank as f32 + 0.5; 8];
        let (mut top, mut bottom) = ([0f32; 8], [0f32; 8]);
        // Every rank records its recvs first: fine inside a group.
        comm.group(|g| {
            g.recv(up, &mut top)?;
            g.recv(down, &mut bottom)?;
            g.send(down, &last)?;
            g.send(up, &first)
        })?;
        Ok((top[0], bottom[0]))
    });
    for (rank, (top, bottom)) in out.into_iter().enumerate() {
        let up = (rank + 3) % 4;
        let down = (rank + 1) % 4;
        assert_eq!(top, up as f32 + 0.5);
        assert_eq!(bottom, down as f32);
    }
}

#[test]
fn a_rank_may_send_to_itself_inside_a_group() {
    let out = run_ok(1, |comm| {
        let mut got = [0i32; 2];
        comm.group(|g| {
            g.send(0, &[5, 6])?;
            g.recv(0, &mut got)
        })?;
        Ok(got)
    });
    assert_eq!(out, vec![[5, 6]]);
}

#[test]
fn two_blocking_sends_at_each_other_time_out_as_under_nccl() {
    let out = World::run_with_timeout(2, SHORT, |comm| {
        let peer = 1 - comm.rank();
        comm.send(peer, &[1u8])?;
        let mut x = [0u8];
        comm.recv(peer, &mut x)
    })
    .unwrap();
    for (rank, r) in out.into_iter().enumerate() {
        match r {
            // Whichever rank gives up first leaves; the other then sees it gone.
            Err(CollectiveError::Timeout {
                rank: r,
                operation,
                waiting_for,
                ..
            }) => {
                assert_eq!(r, rank);
                assert_eq!(operation, format!("send #0 to rank {}", 1 - rank));
                assert!(waiting_for.contains("recv"), "{waiting_for}");
            }
            Err(CollectiveError::PeerGone { peer, .. }) => assert_eq!(peer, 1 - rank),
            other => panic!("rank {rank}: expected a timeout, got {other:?}"),
        }
    }
}

#[test]
fn a_recv_with_no_sender_times_out_naming_the_peer() {
    let world = World::with_timeout(2, SHORT).unwrap();
    let (c0, _c1) = (world.comm(0).unwrap(), world.comm(1).unwrap());
    let err = c0.recv(1, &mut [0u8; 4]).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, CollectiveError::Timeout { rank: 0, .. }),
        "{err:?}"
    );
    assert!(text.contains("recv from rank 1"), "{text}");
}

#[test]
fn a_collective_missing_a_rank_times_out_listing_it() {
    let world = World::with_timeout(3, SHORT).unwrap();
    let (c0, c1, _c2) = (
        world.comm(0).unwrap(),
        world.comm(1).unwrap(),
        world.comm(2),
    );
    let err = std::thread::scope(|s| {
        let h = s.spawn(move || c1.all_reduce_in_place(&mut [1u32], ReduceOp::Max));
        let e0 = c0.all_reduce_in_place(&mut [1u32], ReduceOp::Max);
        let _ = h.join().unwrap();
        e0.unwrap_err()
    });
    assert!(
        err.to_string().contains("ranks [2] have not joined"),
        "{err}"
    );
}

#[test]
fn different_collectives_at_one_position_are_a_mismatch_for_every_rank() {
    let out = World::run(2, |comm| {
        if comm.rank() == 0 {
            comm.all_reduce_in_place(&mut [1.0f32; 4], ReduceOp::Sum)
        } else {
            comm.broadcast(0, &mut [1.0f32; 4])
        }
    })
    .unwrap();
    for r in out {
        let err = r.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, CollectiveError::Mismatch { .. }), "{err:?}");
        assert!(
            text.contains("`all_reduce`") && text.contains("`broadcast`"),
            "{text}"
        );
    }
}

#[test]
fn a_recv_of_the_wrong_length_fails_on_both_sides() {
    let out = World::run(2, |comm| {
        if comm.rank() == 0 {
            comm.send(1, &[1u32, 2, 3])
        } else {
            comm.recv(0, &mut [0u32; 2])
        }
    })
    .unwrap();
    for (rank, r) in out.into_iter().enumerate() {
        match r.unwrap_err() {
            CollectiveError::Mismatch {
                rank: r, detail, ..
            } => {
                assert_eq!(r, rank);
                assert!(
                    detail.contains("12 bytes") && detail.contains("8"),
                    "{detail}"
                );
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

#[test]
fn a_typed_recv_of_another_kind_is_a_mismatch() {
    let out = World::run(2, |comm| {
        if comm.rank() == 0 {
            comm.send(1, &[1.0f32])
        } else {
            comm.recv(0, &mut [0u32])
        }
    })
    .unwrap();
    let err = out[1].clone().unwrap_err();
    assert!(err.to_string().contains("`f32`") && err.to_string().contains("`u32`"));
}

#[test]
fn a_departed_rank_fails_its_peers_at_once() {
    // A long timeout: the test finishing fast shows the departure, not the timeout, ended
    // the wait.
    let start = Instant::now();
    let out = World::run_with_timeout(3, Duration::from_secs(600), |comm| {
        if comm.rank() == 2 {
            return Ok(()); // leaves without joining
        }
        comm.all_reduce_in_place(&mut [0i8; 2], ReduceOp::Sum)?;
        comm.recv(2, &mut [0u8])
    })
    .unwrap();
    assert!(start.elapsed() < Duration::from_secs(60));
    for r in &out[..2] {
        match r {
            Err(CollectiveError::PeerGone {
                peer: 2, operation, ..
            }) => {
                assert!(operation.contains("all_reduce"), "{operation}")
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_panicking_rank_is_reported_and_releases_its_peers() {
    let err = World::run_with_timeout(2, Duration::from_secs(600), |comm| {
        if comm.rank() == 1 {
            panic!("rank one fails");
        }
        comm.recv(1, &mut [0u8])
    })
    .unwrap_err();
    assert_eq!(
        err,
        CollectiveError::Panicked {
            rank: 1,
            message: "rank one fails".into()
        }
    );
}

#[test]
fn bad_arguments_are_rejected_before_any_exchange() {
    assert!(World::new(0).is_err());
    let world = World::with_timeout(2, SHORT).unwrap();
    let c0 = world.comm(0).unwrap();
    assert!(
        world
            .comm(0)
            .unwrap_err()
            .to_string()
            .contains("already taken")
    );
    assert!(
        world
            .comm(2)
            .unwrap_err()
            .to_string()
            .contains("out of range")
    );
    let checks: Vec<(CollectiveError, &str)> = vec![
        (
            c0.send(2, &[1u8]).unwrap_err(),
            "peer 2 is not one of the communicator's 2 ranks",
        ),
        (c0.broadcast(5, &mut [1u8]).unwrap_err(), "root 5"),
        (
            c0.all_reduce(&[1i32; 2], &mut [0; 3], ReduceOp::Sum)
                .unwrap_err(),
            "must be equal",
        ),
        (
            c0.all_reduce_in_place(&mut [1i32], ReduceOp::Avg)
                .unwrap_err(),
            "`avg` needs a floating-point",
        ),
        (
            c0.all_gather(&[1u8; 2], &mut [0; 3]).unwrap_err(),
            "2 ranks times the 2 bytes sent",
        ),
        (
            c0.reduce_scatter(&[1u8; 3], &mut [0; 2], ReduceOp::Min)
                .unwrap_err(),
            "2 ranks times the 2 bytes received",
        ),
        (
            c0.all_reduce_bytes(ElementKind::F32, ReduceOp::Sum, &[0; 6], &mut [0; 6])
                .unwrap_err(),
            "not a whole number of `f32`",
        ),
    ];
    for (err, needle) in checks {
        assert!(
            matches!(err, CollectiveError::InvalidArgument { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(needle), "{err} lacks {needle:?}");
    }
}

// ---- property tests against a sequential reference ---------------------------------

/// The reference: element-wise fold over ranks in typed arithmetic, written without the
/// byte-level reducer above.
fn reference_i32(inputs: &[Vec<i32>], op: ReduceOp) -> Vec<i32> {
    (0..inputs[0].len())
        .map(|i| {
            let column = inputs.iter().map(|v| v[i]);
            match op {
                ReduceOp::Sum => column.fold(0i32, i32::wrapping_add),
                ReduceOp::Prod => column.fold(1i32, i32::wrapping_mul),
                ReduceOp::Max => column.max().unwrap(),
                ReduceOp::Min => column.min().unwrap(),
                ReduceOp::Avg => unreachable!("integers have no avg"),
            }
        })
        .collect()
}

fn reference_f64(inputs: &[Vec<f64>], op: ReduceOp) -> Vec<f64> {
    (0..inputs[0].len())
        .map(|i| {
            let column = inputs.iter().map(|v| v[i]);
            match op {
                ReduceOp::Sum => column.sum(),
                ReduceOp::Prod => column.product(),
                ReduceOp::Max => column.fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::Min => column.fold(f64::INFINITY, f64::min),
                ReduceOp::Avg => column.sum::<f64>() / inputs.len() as f64,
            }
        })
        .collect()
}

fn int_op() -> impl Strategy<Value = ReduceOp> {
    prop_oneof![
        Just(ReduceOp::Sum),
        Just(ReduceOp::Prod),
        Just(ReduceOp::Max),
        Just(ReduceOp::Min)
    ]
}

fn inputs<T: fmt::Debug>(
    element: impl Strategy<Value = T> + Clone,
) -> impl Strategy<Value = Vec<Vec<T>>> {
    (1usize..=5, 0usize..40).prop_flat_map(move |(size, len)| {
        proptest::collection::vec(proptest::collection::vec(element.clone(), len), size)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn all_reduce_and_reduce_scatter_of_i32_match_the_reference(
        inputs in inputs(any::<i32>()),
        op in int_op(),
    ) {
        let size = inputs.len();
        let expected = reference_i32(&inputs, op);
        let out = run_ok(size, |comm| {
            let mine = &inputs[comm.rank()];
            let mut all = vec![0; mine.len()];
            comm.all_reduce(mine, &mut all, op)?;
            // Reduce-scatter over the input repeated once per rank: rank r's share is
            // the whole reduction.
            let send: Vec<i32> = mine.iter().copied().cycle().take(mine.len() * size).collect();
            let mut share = vec![0; mine.len()];
            comm.reduce_scatter(&send, &mut share, op)?;
            Ok((all, share))
        });
        for (all, share) in out {
            prop_assert_eq!(&all, &expected);
            prop_assert_eq!(&share, &expected);
        }
    }

    #[test]
    fn all_reduce_of_f64_matches_the_reference(
        inputs in inputs(-1.0e6f64..1.0e6),
        op in prop_oneof![Just(ReduceOp::Sum), Just(ReduceOp::Max), Just(ReduceOp::Min), Just(ReduceOp::Avg)],
    ) {
        let expected = reference_f64(&inputs, op);
        let out = run_ok(inputs.len(), |comm| {
            let mut x = inputs[comm.rank()].clone();
            comm.all_reduce_in_place(&mut x, op)?;
            Ok(x)
        });
        for got in out {
            for (g, e) in got.iter().zip(&expected) {
                prop_assert!((g - e).abs() <= 1e-9 * e.abs().max(1.0), "{} vs {}", g, e);
            }
        }
    }

    #[test]
    fn all_gather_and_broadcast_of_bytes_match_the_reference(
        inputs in inputs(any::<u8>()),
        root_seed in any::<usize>(),
    ) {
        let size = inputs.len();
        let root = root_seed % size;
        let concat: Vec<u8> = inputs.concat();
        let out = run_ok(size, |comm| {
            let mine = &inputs[comm.rank()];
            let mut gathered = vec![0; mine.len() * size];
            comm.all_gather_bytes(mine, &mut gathered)?;
            let mut b = mine.clone();
            comm.broadcast_bytes(root, &mut b)?;
            Ok((gathered, b))
        });
        for (gathered, b) in out {
            prop_assert_eq!(&gathered, &concat);
            prop_assert_eq!(&b, &inputs[root]);
        }
    }

    /// A random program of messages, each rank doing its part in the global order:
    /// blocking sends complete because every earlier message has. Then the same program
    /// as one group per rank, self-sends included.
    #[test]
    fn random_point_to_point_programs_deliver_in_order(
        size in 1usize..=4,
        messages in proptest::collection::vec((any::<usize>(), any::<usize>(), 0usize..24), 0..24),
    ) {
        let messages: Vec<(usize, usize, usize)> = messages
            .into_iter()
            .map(|(a, b, len)| (a % size, b % size, len))
            .collect();
        let payload = |k: usize, len: usize| -> Vec<u8> {
            (0..len).map(|i| (k * 31 + i) as u8).collect()
        };
        // Expected: what each rank receives, in its order.
        let expected: Vec<Vec<Vec<u8>>> = (0..size)
            .map(|r| {
                messages
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.1 == r)
                    .map(|(k, m)| payload(k, m.2))
                    .collect()
            })
            .collect();

        let ungrouped: Vec<_> = messages.iter().copied().enumerate().filter(|(_, m)| m.0 != m.1).collect();
        let got = run_ok(size, |comm| {
            let me = comm.rank();
            let mut received = Vec::new();
            for &(k, (src, dst, len)) in &ungrouped {
                if src == me {
                    comm.send_bytes(dst, &payload(k, len))?;
                } else if dst == me {
                    let mut buf = vec![0; len];
                    comm.recv_bytes(src, &mut buf)?;
                    received.push((k, buf));
                }
            }
            Ok(received)
        });
        for (r, received) in got.into_iter().enumerate() {
            let want: Vec<(usize, Vec<u8>)> = ungrouped
                .iter()
                .filter(|(_, m)| m.1 == r)
                .map(|&(k, m)| (k, payload(k, m.2)))
                .collect();
            prop_assert_eq!(received, want);
        }

        let got = run_ok(size, |comm| {
            let me = comm.rank();
            let sends: Vec<(usize, Vec<u8>)> = messages
                .iter()
                .enumerate()
                .filter(|(_, m)| m.0 == me)
                .map(|(k, m)| (m.1, payload(k, m.2)))
                .collect();
            let mut recvs: Vec<(usize, Vec<u8>)> = messages
                .iter()
                .filter(|m| m.1 == me)
                .map(|m| (m.0, vec![0; m.2]))
                .collect();
            comm.group(|g| {
                // Recvs first, sends after: the group makes the order irrelevant.
                for (src, buf) in recvs.iter_mut() {
                    g.recv_bytes(*src, buf)?;
                }
                for (dst, data) in &sends {
                    g.send_bytes(*dst, data)?;
                }
                Ok(())
            })?;
            Ok(recvs.into_iter().map(|(_, b)| b).collect::<Vec<_>>())
        });
        prop_assert_eq!(got, expected);
    }
}
