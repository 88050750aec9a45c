//! A communication statement with a range runs beside a stage on another stream that touches
//! other elements of its buffers, and after one that touches some of the same, on two CPU
//! ranks with the race detector on: each kind of statement (send and recv, in-place and
//! out-of-place `all_reduce` and `broadcast`, `all_gather`, `reduce_scatter`), ranges over
//! params, with the values checked.

use gpu_pipeline::{Communicator, Context, DeviceBuffer, Result, Stream, gpu_pipeline};

gpu_pipeline! {
    /// Every kind of communication statement on `main`, each beside a fill or copy on `side`
    /// of the other elements of its buffers, and a stage on `side` before and after them that overlaps.
    pub pipeline Beside {
        streams { main, side }
        params {
            comm: &Communicator,
            nx: usize,
            peer: usize,
            a: &mut DeviceBuffer<f32>,
            b: &mut DeviceBuffer<f32>,
            c: &mut DeviceBuffer<f32>,
            d: &mut DeviceBuffer<f32>,
            e: &mut DeviceBuffer<f32>,
        }
        stage prime on side { fill a[0..1] = 42.0; }
        stage exchange on main {
            send a[0..nx] to peer;
            recv b[0..nx] from peer;
        }
        stage beside_exchange on side {
            fill b[nx..2 * nx] = 7.0;
            copy a[nx..2 * nx] -> c[3 * nx..4 * nx];
        }
        stage reduce on main { all_reduce(sum) c[0..nx]; }
        stage beside_reduce on side { fill c[nx..2 * nx] = 5.0; }
        stage gather on main { all_gather a[0..nx] -> d[0..2 * nx]; }
        stage beside_gather on side { fill d[2 * nx..3 * nx] = 3.0; }
        stage scatter on main { reduce_scatter(sum) d[0..2 * nx] -> e[0..nx]; }
        stage beside_scatter on side { fill e[nx..2 * nx] = 2.0; }
        stage cast on main { broadcast e[0..nx] -> a[2 * nx..3 * nx] from 0; }
        stage beside_cast on side { fill a[3 * nx..4 * nx] = 1.0; }
        stage overlap on side { fill b[nx - 1..nx] = 9.0; }
        concurrent(exchange, beside_exchange);
        concurrent(reduce, beside_reduce);
        concurrent(gather, beside_gather);
        concurrent(scatter, beside_scatter);
        concurrent(cast, beside_cast);
    }
}

/// Runs `rank` on two CPU ranks and returns what each returned, in rank order.
fn two_ranks<T: Send>(rank: impl Fn(usize, &Communicator) -> T + Sync) -> Vec<T> {
    tests::cpu_ranks::on_cpu_ranks(2, rank)
}

const NX: usize = 4;

/// Rank `r`'s `a`: `r * 100 + i`, 4 * NX elements.
fn a_of(r: usize) -> Vec<f32> {
    (0..4 * NX).map(|i| (r * 100 + i) as f32).collect()
}

#[test]
fn every_kind_of_communication_runs_beside_other_elements_without_a_race() {
    every_kind_beside(false);
}

#[test]
fn every_kind_of_communication_runs_beside_other_elements_in_a_graph_without_a_race() {
    every_kind_beside(true);
}

/// Runs `Beside` once on two ranks, eagerly or `captured` and launched, and checks every
/// buffer.
fn every_kind_beside(captured: bool) {
    let results = two_ranks(|r, comm| -> Result<[Vec<f32>; 5]> {
        let ctx = Context::cpu_checked();
        let stream = Stream::new(&ctx)?;
        let mut a = DeviceBuffer::from_slice(&stream, &a_of(r))?;
        let mut b = DeviceBuffer::from_slice(&stream, &[0.0f32; 2 * NX])?;
        let mut c = DeviceBuffer::from_slice(&stream, &[1.0f32 + r as f32; 4 * NX])?;
        let mut d = DeviceBuffer::from_slice(&stream, &[-1.0f32; 3 * NX])?;
        let mut e = DeviceBuffer::from_slice(&stream, &[-1.0f32; 2 * NX])?;
        stream.synchronize()?;
        let mut pipeline = Beside::new(&ctx)?;
        let params = BesideParams {
            comm,
            nx: NX,
            peer: 1 - r,
            a: &mut a,
            b: &mut b,
            c: &mut c,
            d: &mut d,
            e: &mut e,
        };
        if captured {
            let mut graph = pipeline.capture(params)?;
            graph.launch()?;
            graph.synchronize()?;
        } else {
            pipeline.run(params)?.wait()?;
        }
        assert!(ctx.races().is_empty(), "rank {r}: {:#?}", ctx.races());
        Ok([
            a.to_vec(&stream)?,
            b.to_vec(&stream)?,
            c.to_vec(&stream)?,
            d.to_vec(&stream)?,
            e.to_vec(&stream)?,
        ])
    });
    // `prime` wrote a[0] on another stream before the send read it.
    let front = |r: usize| {
        let mut front = a_of(r)[..NX].to_vec();
        front[0] = 42.0;
        front
    };
    // e[0..nx] on rank r: the sum over ranks of d[r * nx..(r + 1) * nx], which is rank r's
    // front on every rank.
    let scattered = |r: usize| front(r).iter().map(|v| 2.0 * v).collect::<Vec<f32>>();
    for (r, result) in results.into_iter().enumerate() {
        let [a, b, c, d, e] = result.unwrap();
        let mut want_a = front(r);
        want_a.extend(a_of(r)[NX..2 * NX].iter().copied());
        want_a.extend(scattered(0));
        want_a.extend([1.0; NX]);
        assert_eq!(a, want_a, "rank {r}: a");
        let mut want_b = front(1 - r);
        want_b[NX - 1] = 9.0;
        want_b.extend([7.0; NX]);
        assert_eq!(b, want_b, "rank {r}: b");
        let mut want_c = vec![3.0; NX];
        want_c.extend([5.0; NX]);
        want_c.extend([1.0 + r as f32; NX]);
        want_c.extend(a_of(r)[NX..2 * NX].iter().copied());
        assert_eq!(c, want_c, "rank {r}: c");
        let mut want_d = front(0);
        want_d.extend(front(1));
        want_d.extend([3.0; NX]);
        assert_eq!(d, want_d, "rank {r}: d");
        let mut want_e = scattered(r);
        want_e.extend([2.0; NX]);
        assert_eq!(e, want_e, "rank {r}: e");
    }
}
