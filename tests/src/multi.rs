//! The multi-GPU pipelines the tests share: the same code runs on simulated ranks and
//! devices of the CPU backend (`tests/tests/multi_rank.rs`, `multi_device.rs`, in CI) and on
//! GPUs (`tests/tests/gpu_multi.rs`, one process per rank through the launcher), each run
//! checked against what its inputs say the result must be.

use gpu_pipeline::{Communicator, Context, DeviceBuffer, Stream, gpu_pipeline};

/// CPU implementations of the test kernels (what `runtime/kernels/test_kernels.cu` does).
pub mod cpu {
    /// `data[i] += value` for `i < n`.
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v += value;
        }
    }

    /// `out[0] += sum(input[..n])`.
    pub fn reduce_sum(n: u32, input: &[f32], out: &mut [f32]) {
        out[0] += input[..n as usize].iter().sum::<f32>();
    }

    /// `y[i] += a * x[i]` for `i < n`.
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }
}

gpu_pipeline! {
    /// One rank's block of `rows` rows of `nx` (row 0 and row `rows - 1` are halos): every
    /// element grows by `value`, the halos are then exchanged with both ring neighbours, and
    /// the block's sum is reduced over all ranks into `total`.
    pub pipeline Ring {
        streams { compute, halo(priority = high) }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
            fn reduce_sum(n: u32, input: &[f32; unbounded], out: &mut [f32; unbounded]) cpu = cpu::reduce_sum;
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

gpu_pipeline! {
    /// Each device grows its own half; device 1's half is copied to device 0, which adds it
    /// into its own (`y0 += 2 * from1`); the result is copied back to device 1.
    pub pipeline Halves {
        devices { gpu0, gpu1 }
        streams { main on gpu0, other on gpu1, pull on gpu1 }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu::saxpy;
        }
        params {
            n: u32,
            y0: &mut DeviceBuffer<f32> on gpu0,
            y1: &mut DeviceBuffer<f32> on gpu1,
        }
        scratch {
            from1: DeviceBuffer<f32> on gpu0 = n as usize,
        }
        stage grow0 on main {
            launch k::add_scalar(n, 1.0, y0) grid n.div_ceil(256) block 256;
        }
        stage grow1 on other {
            launch k::add_scalar(n, 10.0, y1) grid n.div_ceil(256) block 256;
        }
        stage fetch on main {
            copy y1 -> from1;
        }
        stage combine on main {
            launch k::saxpy(n, 2.0, from1, y0) grid n.div_ceil(256) block 256;
        }
        stage publish on pull {
            copy y0 -> y1;
        }
    }
}

/// The ring neighbours (up, down) of `rank` among `size` ranks.
pub fn neighbours(rank: usize, size: usize) -> (usize, usize) {
    ((rank + size - 1) % size, (rank + 1) % size)
}

/// Checks one rank's field and the reduced total after `steps` steps of [`Ring`].
pub fn check_ring(field: &[f32], total: f32, rank: usize, size: usize, nx: usize, steps: usize) {
    let value = |r: usize| (r + 1) as f32;
    let rows = field.len() / nx;
    let (up, down) = neighbours(rank, size);
    let k = steps as f32;
    let top = &field[..nx];
    assert!(
        top.iter().all(|&v| v == k * value(up)),
        "rank {rank} top halo: {top:?}"
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

/// One rank of [`Ring`] on `ctx`: two eager steps, then a captured step replayed three
/// times, then captured again by a setter and replayed once, each checked. Every rank must
/// call it (the steps communicate).
pub fn ring_rank(ctx: &Context, comm: &Communicator, nx: usize, rows: usize) {
    let (rank, size) = (comm.rank(), comm.size());
    let stream = Stream::non_blocking(ctx).unwrap();
    let (up, down) = neighbours(rank, size);
    let mut field = DeviceBuffer::<f32>::zeros(&stream, nx * rows).unwrap();
    let mut total = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut ring = Ring::new(ctx).unwrap();
    let value = (rank + 1) as f32;
    macro_rules! params {
        () => {
            RingParams {
                comm,
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
        // `up` feeds a `recv`, which a replay cannot change in place: its setter captures
        // the step again, on every rank alike.
        graph.set_up(up).unwrap();
        graph.launch().unwrap();
        graph.synchronize().unwrap();
    }
    check_ring(&read(&field), read(&total)[0], rank, size, nx, 6);
    assert!(ctx.races().is_empty(), "rank {rank}: {:?}", ctx.races());
}

/// One rank of [`Collectives`] on `ctx`: one eager step, then one replay, checked.
pub fn collectives_rank(ctx: &Context, comm: &Communicator) {
    let n = 3;
    let size = comm.size();
    let stream = Stream::non_blocking(ctx).unwrap();
    let rank = comm.rank() as i32;
    let mut seed = DeviceBuffer::from_slice(&stream, &[rank * 100 + 7; 2]).unwrap();
    let part: Vec<i32> = (0..n).map(|i| rank * 10 + i).collect();
    let part = DeviceBuffer::from_slice(&stream, &part).unwrap();
    let mut whole = DeviceBuffer::<i32>::zeros(&stream, n as usize * size).unwrap();
    let mut mine = DeviceBuffer::<i32>::zeros(&stream, n as usize).unwrap();
    let mut peak = DeviceBuffer::<i32>::zeros(&stream, n as usize).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Collectives::new(ctx).unwrap();
    macro_rules! params {
        () => {
            CollectivesParams {
                comm,
                seed: &mut seed,
                part: &part,
                whole: &mut whole,
                mine: &mut mine,
                peak: &mut peak,
            }
        };
    }
    // Eagerly first (NCCL connects its peers on first use), then captured and replayed: the
    // same step gives the same results.
    pipeline.run(params!()).unwrap().wait().unwrap();
    let mut graph = pipeline.capture(params!()).unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    let read = |b: &DeviceBuffer<i32>| b.to_vec(&stream).unwrap();
    let size = size as i32;
    assert_eq!(read(&seed), [7, 7], "rank {rank}: rank 0's seed");
    let gathered: Vec<i32> = (0..size)
        .flat_map(|r| (0..n).map(move |i| r * 10 + i))
        .collect();
    assert_eq!(read(&whole), gathered, "rank {rank}");
    // Every rank's `whole` is the same, so each element of the scattered sum is `size` times
    // that element of this rank's block.
    let scattered: Vec<i32> = (0..n).map(|i| size * (rank * 10 + i)).collect();
    assert_eq!(read(&mine), scattered, "rank {rank}");
    let top: Vec<i32> = (0..n).map(|i| size * ((size - 1) * 10 + i)).collect();
    assert_eq!(read(&peak), top, "rank {rank}");
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

/// [`Halves`] on two devices (two contexts of one device work too): one eager step and one
/// replay, each checked.
pub fn halves(gpu0: &Context, gpu1: &Context, n: u32) {
    let s0 = Stream::non_blocking(gpu0).unwrap();
    let s1 = Stream::non_blocking(gpu1).unwrap();
    let mut y0 = DeviceBuffer::<f32>::zeros(&s0, n as usize).unwrap();
    let mut y1 = DeviceBuffer::<f32>::zeros(&s1, n as usize).unwrap();
    s0.synchronize().unwrap();
    s1.synchronize().unwrap();
    let mut pipeline = Halves::new(gpu0, gpu1).unwrap();
    assert_eq!(pipeline.devices().len(), 2);
    let all = |b: &DeviceBuffer<f32>, s: &Stream, v: f32| {
        let got = b.to_vec(s).unwrap();
        assert!(got.iter().all(|&x| x == v), "want {v}, got {:?}", &got[..4]);
    };
    pipeline
        .run(HalvesParams {
            n,
            y0: &mut y0,
            y1: &mut y1,
        })
        .unwrap()
        .wait()
        .unwrap();
    // y0 = 1 + 2 * 10 = 21, copied back to y1.
    all(&y0, &s0, 21.0);
    all(&y1, &s1, 21.0);
    {
        let mut graph = pipeline
            .capture(HalvesParams {
                n,
                y0: &mut y0,
                y1: &mut y1,
            })
            .unwrap();
        graph.launch().unwrap();
        graph.synchronize().unwrap();
    }
    // y0 = 21 + 1 + 2 * (21 + 10) = 84.
    all(&y0, &s0, 84.0);
    all(&y1, &s1, 84.0);
    // A profiled step: every stage timed on its own device.
    let profile = pipeline
        .profile(HalvesParams {
            n,
            y0: &mut y0,
            y1: &mut y1,
        })
        .unwrap();
    assert_eq!(profile.stages.len(), 5);
    assert!(
        profile
            .stages
            .iter()
            .all(|s| s.end_ms >= s.start_ms && s.start_ms >= 0.0),
        "{profile}"
    );
    assert!(gpu0.races().is_empty(), "{:?}", gpu0.races());
}
