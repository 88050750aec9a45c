//! Four stages on four streams, each a device loop whose one-kernel body sets its own
//! condition, with nothing ordering the loops against each other, captured again and again
//! and replayed: every loop counts down to zero on every replay. On CUDA the driver faults
//! when WHILE nodes of one graph run concurrently, so the built graph runs the loops one
//! after another (runtime/src/cuda/graph/loops.rs); the CPU backend runs them as they come.

use gpu_pipeline::{Context, DeviceBuffer, Stream, gpu_pipeline};

// The kernels' CPU twins.
use tests::condition_kernels as cpu;

gpu_pipeline! {
    /// Counts each of `na`..`nd` down to zero, from `high` on streams `a` and `c` and from 1
    /// (no iteration of a `while`, one of a `do ... while`) on `b` and `d`.
    pipeline FourLoops {
        streams { a, b, c, d }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_count_down(n: &mut [u32; unbounded], go: Condition) cpu = cpu::count_down;
        }
        params {
            high: u32,
            na: &mut DeviceBuffer<u32>,
            nb: &mut DeviceBuffer<u32>,
            nc: &mut DeviceBuffer<u32>,
            nd: &mut DeviceBuffer<u32>,
        }
        scratch { ga: Condition, gb: Condition, gc: Condition, gd: Condition }
        stage first on a {
            fill na = high;
            launch k::gp_count_down(na, ga) grid 1u32 block 1u32;
            while ga max 100 {
                launch k::gp_count_down(na, ga) grid 1u32 block 1u32;
            }
        }
        stage second on b {
            fill nb = 1u32;
            launch k::gp_count_down(nb, gb) grid 1u32 block 1u32;
            while gb max 100 {
                launch k::gp_count_down(nb, gb) grid 1u32 block 1u32;
            }
        }
        stage third on c {
            fill nc = high;
            do {
                launch k::gp_count_down(nc, gc) grid 1u32 block 1u32;
            } while gc max 100;
        }
        stage fourth on d {
            fill nd = 1u32;
            do {
                launch k::gp_count_down(nd, gd) grid 1u32 block 1u32;
            } while gd max 100;
        }
    }
}

/// Twenty captures of the step, each replayed twice: after each, every counter is zero (a
/// loop that stopped early leaves it above, one that ran on wraps it around).
fn parallel_stage_loops_run_every_replay(ctx: &Context) {
    const CAPTURES: u32 = 20;
    const REPLAYS: u32 = 2;
    let stream = Stream::new(ctx).unwrap();
    let ones = || DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let (mut na, mut nb, mut nc, mut nd) = (ones(), ones(), ones(), ones());
    stream.synchronize().unwrap();
    let mut pipeline = FourLoops::new(ctx).unwrap();
    for capture in 0..CAPTURES {
        let mut graph = pipeline
            .capture(FourLoopsParams {
                high: 6,
                na: &mut na,
                nb: &mut nb,
                nc: &mut nc,
                nd: &mut nd,
            })
            .unwrap();
        for _ in 0..REPLAYS {
            graph.launch().unwrap();
        }
        graph.synchronize().unwrap();
        drop(graph);
        for (name, counter) in [("a", &na), ("b", &nb), ("c", &nc), ("d", &nd)] {
            let left = counter.to_vec(&stream).unwrap()[0];
            assert_eq!(left, 0, "the loop on stream {name}, capture {capture}");
        }
    }
}

tests::on_both_backends!(parallel_stage_loops_run_every_replay,);
