//! `swap(a, b);` at the end of a device loop's body: a ping-pong without a copy per iteration.
//! The body runs with the two names exchanged every other iteration; after an odd count the
//! second buffer is copied into the first, so the first name holds what the loop left under it.
//! Each form (`while`, `do ... while`) eagerly (the host alternates the arguments) and as a
//! built graph (the body unrolled by two, tested after each half), on the checked CPU backend
//! and, `#[ignore = "needs a CUDA GPU"]`, on a GPU.

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

// The kernels' CPU twins.
use tests::condition_kernels as cpu;

gpu_pipeline! {
    /// Counts `x` down through `y` while `r > 0` (a `while`), and `z` through `w` (a
    /// `do ... while`), each sweep reading one buffer and writing the other.
    pipeline Sweeps {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        params {
            limit: u32,
            x: &mut DeviceBuffer<u32>,
            y: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
            z: &mut DeviceBuffer<u32>,
            w: &mut DeviceBuffer<u32>,
            s: &mut DeviceBuffer<u32>,
        }
        stage ahead on main {
            while r > 0u32 max limit {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                swap(x, y);
            }
        }
        stage behind on main {
            do {
                launch k::gp_step(z, w, s) grid 1u32 block 1u32;
                swap(z, w);
            } while s > 0u32 max limit;
        }
    }
}

fn read(stream: &Stream, buffer: &DeviceBuffer<u32>) -> u32 {
    buffer.to_vec(stream).unwrap()[0]
}

fn set(stream: &Stream, buffer: &mut DeviceBuffer<u32>, value: u32) {
    *buffer = DeviceBuffer::from_slice(stream, &[value]).unwrap();
    stream.synchronize().unwrap();
}

/// From `n`, each loop runs `n` sweeps and leaves 0 under its first name, an odd or even
/// count alike; the limit stops it with the named error.
fn swapping_loops_leave_the_result_under_the_first_name(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let zero = || DeviceBuffer::<u32>::zeros(&stream, 1).unwrap();
    let (mut x, mut y, mut r, mut z, mut w, mut s) =
        (zero(), zero(), zero(), zero(), zero(), zero());
    stream.synchronize().unwrap();
    let mut pipeline = Sweeps::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    macro_rules! params {
        ($limit:expr) => {
            SweepsParams {
                limit: $limit,
                x: &mut x,
                y: &mut y,
                r: &mut r,
                z: &mut z,
                w: &mut w,
                s: &mut s,
            }
        };
    }
    for n in [5u32, 4, 1] {
        for buffer in [&mut x, &mut r, &mut z, &mut s] {
            set(&stream, buffer, n);
        }
        pipeline.run(params!(100)).unwrap().wait().unwrap();
        assert_eq!(
            (read(&stream, &x), read(&stream, &z)),
            (0, 0),
            "eager, from {n}"
        );
        // An even count leaves the second buffer as the last sweep but one wrote it; an odd
        // one the copy of the first.
        let expected = if n % 2 == 0 { 1 } else { 0 };
        assert_eq!(read(&stream, &y), expected, "eager, from {n}");

        for buffer in [&mut x, &mut r, &mut z, &mut s] {
            set(&stream, buffer, n);
        }
        let mut graph = pipeline.capture(params!(100)).unwrap();
        if ctx.handle().is_some() {
            // `while`: K0 -> WHILE -> K -> IF; `do ... while`: WHILE -> K -> IF (each body
            // unrolled by two inside its WHILE).
            assert_eq!(graph.node_count().unwrap(), 7);
        }
        graph.launch().unwrap();
        graph.synchronize().unwrap();
        let loops: Vec<u32> = graph
            .exec()
            .unwrap()
            .loops()
            .iter()
            .map(|l| l.iterations())
            .collect();
        assert_eq!(loops, [n, n], "graph, from {n}");
        drop(graph);
        assert_eq!(
            (read(&stream, &x), read(&stream, &z)),
            (0, 0),
            "graph, from {n}"
        );
        assert_eq!(read(&stream, &y), expected, "graph, from {n}");
    }
    // The `while` runs no sweep from 0 (the `do ... while` one, to u32::MAX, then stops at
    // the limit).
    for buffer in [&mut x, &mut r] {
        set(&stream, buffer, 0);
    }
    for buffer in [&mut z, &mut s] {
        set(&stream, buffer, 9);
    }
    match pipeline.run(params!(3)).map(|run| run.wait()) {
        Err(Error::Stage { source, .. }) => assert!(
            matches!(*source, Error::IterationLimit { max_iterations: 3, ref label } if label == "s > 0u32"),
            "{source}"
        ),
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    ctx.synchronize().unwrap();
    // Three sweeps from 9 (8 into `w`, 7 into `z`, 6 into `w`), and no copy after a loop that
    // stopped at its maximum.
    assert_eq!((read(&stream, &x), read(&stream, &z)), (0, 7));
    for buffer in [&mut z, &mut s] {
        set(&stream, buffer, 9);
    }
    let mut graph = pipeline.capture(params!(3)).unwrap();
    graph.launch().unwrap();
    match graph.synchronize() {
        Err(Error::Step { source, .. }) => assert!(
            matches!(
                *source,
                Error::IterationLimit {
                    max_iterations: 3,
                    ..
                }
            ),
            "{source}"
        ),
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    drop(graph);
    assert_eq!((read(&stream, &x), read(&stream, &z)), (0, 7));
}

tests::on_both_backends!(swapping_loops_leave_the_result_under_the_first_name,);
