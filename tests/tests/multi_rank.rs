//! Pipelines that communicate, run on simulated ranks (threads, each with its own checked
//! CPU context, pipeline and `World` rank): halo exchanges with `send`/`recv` inside a stage,
//! `all_reduce`, `broadcast`, `all_gather` and `reduce_scatter`, eagerly and replayed from a
//! captured graph, with 1, 2 and 4 ranks. Every result is checked against what the ranks'
//! inputs say it must be, and the race detector must find nothing.

use gpu_pipeline::collective::ReduceOp;
use gpu_pipeline::{CommStage, Communicator, Context, DeviceBuffer, Error, Stream, gpu_pipeline};

/// CPU implementations of the test kernels (what `runtime/kernels/test_kernels.cu` does).
mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v += value;
        }
    }

    pub fn reduce_sum(n: u32, input: &[f32], out: &mut [f32]) {
        out[0] += input[..n as usize].iter().sum::<f32>();
    }
}

gpu_pipeline! {
    /// One rank's block of `rows` rows of `nx` (row 0 and row `rows - 1` are halos): every
    /// element grows by `value`, the halos are then exchanged with both ring neighbours, and
    /// the block's sum is reduced over all ranks into `total`.
    pub pipeline Ring {
        streams { compute, halo(priority = high) }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32]) cpu = cpu::add_scalar;
            fn reduce_sum(n: u32, input: &[f32], out: &mut [f32]) cpu = cpu::reduce_sum;
        }
        params {
            comm: &Communicator,
            nx: usize,
            rows: usize,
            value: f32,
            up: usize,
            down: usize,
            field: &mut DeviceBuffer<f32>,
            total: &mut DeviceBuffer<f32>,
        }
        scratch { norm: DeviceBuffer<f32> = 1 }
        stage grow on compute {
            launch k::add_scalar((nx * rows) as u32, value, field)
                grid ((nx * rows) as u32).div_ceil(256) block 256;
        }
        stage exchange on halo {
            recv field[0..nx] from up;
            send field[(rows - 2) * nx..(rows - 1) * nx] to down;
            recv field[(rows - 1) * nx..] from down;
            send field[nx..2 * nx] to up;
        }
        stage sum on compute {
            fill norm = 0.0;
            launch k::reduce_sum((nx * rows) as u32, field, norm)
                grid ((nx * rows) as u32).div_ceil(256) block 256 shared 1024;
        }
        stage reduce on halo {
            all_reduce(sum) norm -> total;
        }
    }
}

gpu_pipeline! {
    /// The other collectives: rank 0's `seed` broadcast to every rank, every rank's `part`
    /// gathered into `whole`, `whole` reduced and scattered back into `mine`, and `mine`'s
    /// maximum reduced in place.
    pub pipeline Collectives {
        streams { main, side }
        params {
            comm: &Communicator,
            seed: &mut DeviceBuffer<i32>,
            part: &DeviceBuffer<i32>,
            whole: &mut DeviceBuffer<i32>,
            mine: &mut DeviceBuffer<i32>,
            peak: &mut DeviceBuffer<i32>,
        }
        stage share on main {
            broadcast seed from 0;
            all_gather part -> whole;
        }
        stage scatter on side {
            reduce_scatter(sum) whole -> mine;
        }
        stage top on main {
            copy mine -> peak;
            all_reduce(max) peak;
        }
    }
}

/// The ring neighbours of `rank`.
fn neighbours(rank: usize, size: usize) -> (usize, usize) {
    ((rank + size - 1) % size, (rank + 1) % size)
}

/// What every rank's field and the total must hold after `steps` steps.
fn check_ring(field: &[f32], total: f32, rank: usize, size: usize, nx: usize, steps: usize) {
    let value = |r: usize| (r + 1) as f32;
    let rows = field.len() / nx;
    let (up, down) = neighbours(rank, size);
    let k = steps as f32;
    assert!(
        field[..nx].iter().all(|&v| v == k * value(up)),
        "rank {rank} top halo: {:?}",
        &field[..nx]
    );
    let interior = &field[nx..(rows - 1) * nx];
    assert!(
        interior.iter().all(|&v| v == k * value(rank)),
        "rank {rank} interior"
    );
    let bottom = &field[(rows - 1) * nx..];
    assert!(
        bottom.iter().all(|&v| v == k * value(down)),
        "rank {rank} bottom halo: {bottom:?}"
    );
    // Every rank's sum: its interior and both halos.
    let per_rank = |r: usize| {
        let (u, d) = neighbours(r, size);
        k * (((rows - 2) * nx) as f32 * value(r) + nx as f32 * (value(u) + value(d)))
    };
    let want: f32 = (0..size).map(per_rank).sum();
    assert!(
        (total - want).abs() <= 1e-3 * want,
        "rank {rank}: total {total}, want {want}"
    );
}

/// Runs the ring pipeline on `size` ranks: two eager steps, then three replays of a captured
/// step, checking after each.
fn ring(size: usize) {
    let (nx, rows) = (8, 5);
    let ranks = Communicator::cpu_ranks(size).unwrap();
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|comm| {
                scope.spawn(move || {
                    let ctx = Context::cpu_checked();
                    let stream = Stream::new(&ctx).unwrap();
                    let rank = comm.rank();
                    let (up, down) = neighbours(rank, size);
                    let mut field = DeviceBuffer::<f32>::zeros(&stream, nx * rows).unwrap();
                    let mut total = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
                    stream.synchronize().unwrap();
                    let mut ring = Ring::new(&ctx).unwrap();
                    let value = (rank + 1) as f32;
                    macro_rules! params {
                        () => {
                            RingParams {
                                comm: &comm,
                                nx,
                                rows,
                                value,
                                up,
                                down,
                                field: &mut field,
                                total: &mut total,
                            }
                        };
                    }
                    ring.run_steps(params!(), 2).unwrap().wait().unwrap();
                    let read = |b: &DeviceBuffer<f32>| b.to_vec(&stream).unwrap();
                    check_ring(&read(&field), read(&total)[0], rank, size, nx, 2);
                    {
                        let mut graph = ring.capture(params!()).unwrap();
                        for _ in 0..3 {
                            graph.launch().unwrap();
                        }
                        graph.synchronize().unwrap();
                    }
                    check_ring(&read(&field), read(&total)[0], rank, size, nx, 5);
                    assert!(ctx.races().is_empty(), "rank {rank}: {:?}", ctx.races());
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    });
}

#[test]
fn a_halo_ring_and_a_reduced_sum_on_one_rank() {
    ring(1);
}

#[test]
fn a_halo_ring_and_a_reduced_sum_on_two_ranks() {
    ring(2);
}

#[test]
fn a_halo_ring_and_a_reduced_sum_on_four_ranks() {
    ring(4);
}

/// `broadcast`, `all_gather`, `reduce_scatter` and an in-place `all_reduce` on `size` ranks.
fn collectives(size: usize) {
    let n = 3;
    let ranks = Communicator::cpu_ranks(size).unwrap();
    std::thread::scope(|scope| {
        for comm in ranks {
            scope.spawn(move || {
                let ctx = Context::cpu_checked();
                let stream = Stream::new(&ctx).unwrap();
                let rank = comm.rank() as i32;
                let mut seed = DeviceBuffer::from_slice(&stream, &[rank * 100 + 7; 2]).unwrap();
                let part: Vec<i32> = (0..n).map(|i| rank * 10 + i).collect();
                let part = DeviceBuffer::from_slice(&stream, &part).unwrap();
                let mut whole = DeviceBuffer::<i32>::zeros(&stream, n as usize * size).unwrap();
                let mut mine = DeviceBuffer::<i32>::zeros(&stream, n as usize).unwrap();
                let mut peak = DeviceBuffer::<i32>::zeros(&stream, n as usize).unwrap();
                stream.synchronize().unwrap();
                let mut pipeline = Collectives::new(&ctx).unwrap();
                let params = CollectivesParams {
                    comm: &comm,
                    seed: &mut seed,
                    part: &part,
                    whole: &mut whole,
                    mine: &mut mine,
                    peak: &mut peak,
                };
                pipeline.capture(params).unwrap().launch().unwrap();
                let read = |b: &DeviceBuffer<i32>| b.to_vec(&stream).unwrap();
                stream.synchronize().unwrap();
                let size = size as i32;
                assert_eq!(read(&seed), [7, 7], "rank {rank}: rank 0's seed");
                let gathered: Vec<i32> = (0..size)
                    .flat_map(|r| (0..n).map(move |i| r * 10 + i))
                    .collect();
                assert_eq!(read(&whole), gathered, "rank {rank}");
                // Every rank's `whole` is the same, so each element of the scattered sum is
                // `size` times that element of this rank's block.
                let scattered: Vec<i32> = (0..n).map(|i| size * (rank * 10 + i)).collect();
                assert_eq!(read(&mine), scattered, "rank {rank}");
                let top: Vec<i32> = (0..n).map(|i| size * ((size - 1) * 10 + i)).collect();
                assert_eq!(read(&peak), top, "rank {rank}");
                assert!(ctx.races().is_empty(), "{:?}", ctx.races());
            });
        }
    });
}

#[test]
fn broadcast_gather_scatter_and_reduce_on_two_ranks() {
    collectives(2);
}

#[test]
fn broadcast_gather_scatter_and_reduce_on_four_ranks() {
    collectives(4);
}

/// The race detector sees a stage group's accesses: a receive on one stream and a read of
/// the same buffer on another, with no event between them, is reported.
#[test]
fn the_race_detector_sees_communication_that_no_event_orders() {
    let comm = Communicator::cpu_ranks(1).unwrap().remove(0);
    let ctx = Context::cpu_checked();
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let mut field = DeviceBuffer::<f32>::zeros(&a, 4).unwrap().named("field");
    let mut copy = DeviceBuffer::<f32>::zeros(&a, 4).unwrap();
    a.synchronize().unwrap();
    let mut group = CommStage::new(&comm, &a);
    group.send(&field, 2..4, 0).unwrap();
    group.recv(&mut field, 0..2, 0).unwrap();
    group.finish().unwrap();
    b.copy_dtod(&field, &mut copy).unwrap();
    a.synchronize().unwrap();
    let err = b.synchronize().unwrap_err();
    assert!(matches!(err, Error::Cpu(_)), "{err}");
    assert!(err.to_string().contains("field"), "{err}");
    let _ = ReduceOp::Sum;
}
