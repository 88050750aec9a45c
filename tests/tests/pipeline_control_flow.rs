//! `while` and `if` in pipelines, and steps built as graphs straight from the stage graph:
//! iteration counts, early exit, the iteration-limit error, an `if` on every k-th step, and
//! the built graph's edge count against the reduced stage graph's. Each runs eagerly (the
//! host decides each condition) and as a built graph (the device decides), on the checked CPU
//! backend and, `#[ignore = "needs a CUDA GPU"]`, on a GPU.

use gpu_pipeline::{Context, DeviceBuffer, Error, PinnedBuffer, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

gpu_pipeline! {
    /// Lowers `residual` by one per iteration until it is at most `tol`, counting iterations.
    pipeline Converge {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            start: f32,
            tol: f32,
            limit: u32,
            residual: &mut DeviceBuffer<f32>,
            iterations: &mut DeviceBuffer<f32>,
        }
        stage solve on main {
            fill residual = start;
            while residual > tol max limit {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
                launch k::add_scalar(1u32, 1.0f32, iterations) grid 1u32 block 1u32;
            }
        }
    }
}

gpu_pipeline! {
    /// A time step on `field`, and a snapshot of it on every `every`-th step, on another
    /// stream; a flag loop that a fill in its body ends.
    pipeline Snapshots {
        streams { compute, copy }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            n: u32,
            every: u32,
            field: &mut DeviceBuffer<f32>,
            snapshot: &mut PinnedBuffer<f32>,
            taken: &mut DeviceBuffer<f32>,
            flag: &mut DeviceBuffer<u32>,
        }
        stage advance on compute {
            launch k::add_scalar(n, 1.0f32, field) grid 1u32 block 32u32;
        }
        stage save on copy {
            if step % every == 0 {
                copy field -> snapshot;
                launch k::add_scalar(1u32, 1.0f32, taken) grid 1u32 block 1u32;
            }
            fill flag = 1u32;
            while flag != 0u32 max 3 {
                fill flag = 0u32;
            }
        }
    }
}

gpu_pipeline! {
    /// Four single-statement stages on two streams: `a` feeds `b` (other stream) and `c`
    /// (same stream); `d` joins both. The captured form would add fork and join events; the
    /// built graph has exactly the four edges of the stage graph.
    pipeline Diamond {
        streams { one, two }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            x: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
            z: &mut DeviceBuffer<f32>,
        }
        stage a on one { launch k::add_scalar(1u32, 1.0f32, x) grid 1u32 block 1u32; }
        stage b on two { call double(x, y) reads(x) writes(y); }
        stage c on one { launch k::add_scalar(1u32, 1.0f32, z) grid 1u32 block 1u32; }
        stage d on one { call double(y, z) reads(y) writes(z); }
    }
}

/// `dst = src` through the stage's stream (a "library" call, captured into the graph).
fn double<M>(
    stream: &gpu_pipeline::TypedStream<'_, M>,
    src: &DeviceBuffer<f32>,
    dst: &mut DeviceBuffer<f32>,
) -> gpu_pipeline::Result<()> {
    stream.copy_dtod(src, dst)
}

fn read(stream: &Stream, buffer: &DeviceBuffer<f32>) -> f32 {
    buffer.to_vec(stream).unwrap()[0]
}

/// The loop runs `start` iterations (5), stops early when the residual starts below `tol`,
/// and fails with the named error when `limit` is too small, eagerly and as a built graph.
fn loops_count_exit_early_and_stop_at_the_limit(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut residual = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut iterations = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Converge::new(ctx).unwrap();
    fn params<'a>(
        start: f32,
        limit: u32,
        residual: &'a mut DeviceBuffer<f32>,
        iterations: &'a mut DeviceBuffer<f32>,
    ) -> ConvergeParams<'a> {
        ConvergeParams {
            start,
            tol: 0.5,
            limit,
            residual,
            iterations,
        }
    }

    // Eager: the host reads the residual before each iteration.
    pipeline
        .run(params(5.0, 100, &mut residual, &mut iterations))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read(&stream, &iterations), 5.0);
    assert_eq!(read(&stream, &residual), 0.0);
    // Early exit: already converged.
    pipeline
        .run(params(0.25, 100, &mut residual, &mut iterations))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read(&stream, &iterations), 5.0);
    // The limit: 3 iterations from 5 do not converge.
    let err = pipeline
        .run(params(5.0, 3, &mut residual, &mut iterations))
        .map(|run| run.wait());
    match err {
        Err(Error::Stage {
            stage: "solve",
            source,
            ..
        }) => assert!(
            matches!(*source, Error::IterationLimit { max_iterations: 3, ref label } if label == "residual > tol"),
            "{source}"
        ),
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    pipeline.context().synchronize().unwrap();
    assert_eq!(read(&stream, &iterations), 8.0, "3 more iterations ran");

    // The same as a built graph: the device decides.
    let mut graph = pipeline
        .capture(params(5.0, 100, &mut residual, &mut iterations))
        .unwrap();
    for _ in 0..2 {
        graph.launch().unwrap();
    }
    graph.synchronize().unwrap();
    assert_eq!(
        graph.exec().expect("the step is captured").loops()[0].iterations(),
        5
    );
    graph.set_start(0.25).unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    assert_eq!(
        graph.exec().expect("the step is captured").loops()[0].iterations(),
        0,
        "early exit"
    );
    graph.set_start(5.0).unwrap();
    graph.set_limit(3).unwrap();
    graph.launch().unwrap();
    match graph.synchronize() {
        Err(Error::Step {
            pipeline: "Converge",
            source,
            ..
        }) => {
            assert!(
                matches!(
                    *source,
                    Error::IterationLimit {
                        max_iterations: 3,
                        ..
                    }
                ),
                "{source}"
            )
        }
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    // Reported once.
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!(read(&stream, &iterations), 8.0 + 10.0 + 3.0);
}

/// `if step % every == 0` takes a snapshot on steps 0, 3, 6, ...: eagerly and in replays,
/// one count across both. The flag loop runs once per step.
fn snapshots_on_every_kth_step(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut field = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
    let mut snapshot = PinnedBuffer::<f32>::zeros(ctx, 4).unwrap();
    let mut taken = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut flag = DeviceBuffer::<u32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Snapshots::new(ctx).unwrap();
    // Steps 0..4 eagerly: snapshots at 0 and 3.
    pipeline
        .run_steps(
            SnapshotsParams {
                n: 4,
                every: 3,
                field: &mut field,
                snapshot: &mut snapshot,
                taken: &mut taken,
                flag: &mut flag,
            },
            4,
        )
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read(&stream, &taken), 2.0);
    assert_eq!(snapshot.to_vec().unwrap(), vec![4.0; 4], "taken at step 3");
    // Steps 4..10 as replays: snapshots at 6 and 9.
    let mut graph = pipeline
        .capture(SnapshotsParams {
            n: 4,
            every: 3,
            field: &mut field,
            snapshot: &mut snapshot,
            taken: &mut taken,
            flag: &mut flag,
        })
        .unwrap();
    for _ in 0..6 {
        graph.launch().unwrap();
    }
    graph.synchronize().unwrap();
    let loops = graph.exec().expect("the step is captured").loops();
    assert_eq!(loops.len(), 1);
    assert_eq!(
        loops[0].iterations(),
        1,
        "the flag loop ends after one fill"
    );
    drop(graph);
    assert_eq!(read(&stream, &taken), 4.0);
    assert_eq!(snapshot.to_vec().unwrap(), vec![10.0; 4], "taken at step 9");
    assert_eq!(read(&stream, &field), 10.0);
}

/// The built graph has exactly the reduced stage graph's edges (with fault tracking off, one
/// node per stage), and computes what the eager step computes.
fn built_graph_edges_match_the_stage_graph(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut x = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut z = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(Diamond::GRAPH_EDGES, 4);
    let mut pipeline = Diamond::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    let mut graph = pipeline
        .capture(DiamondParams {
            x: &mut x,
            y: &mut y,
            z: &mut z,
        })
        .unwrap();
    assert_eq!(graph.node_count().unwrap(), 4);
    assert_eq!(graph.edge_count().unwrap(), Diamond::GRAPH_EDGES);
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    // x = 1, y = x, z: 1 then overwritten by y.
    assert_eq!(read(&stream, &z), 1.0);
    // With tracking on, the marks are extra nodes after the stages, never between them.
    pipeline.set_fault_tracking(true);
    let graph = pipeline
        .capture(DiamondParams {
            x: &mut x,
            y: &mut y,
            z: &mut z,
        })
        .unwrap();
    // 4 stages + 1 reset + 4 marks; each mark after its stage and the previous mark (or the
    // reset).
    assert_eq!(graph.node_count().unwrap(), 9);
    assert_eq!(graph.edge_count().unwrap(), Diamond::GRAPH_EDGES + 8);
}

tests::on_both_backends!(
    loops_count_exit_early_and_stop_at_the_limit,
    snapshots_on_every_kth_step,
    built_graph_edges_match_the_stage_graph,
    a_failed_step_still_counts_for_step,
);

gpu_pipeline! {
    /// Bumps `even` on even steps, then a loop that fails when `start` is above `max`.
    pipeline Counted {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params { start: f32, even: &mut DeviceBuffer<f32>, residual: &mut DeviceBuffer<f32> }
        stage tick on main {
            if step % 2 == 0 {
                launch k::add_scalar(1u32, 1.0f32, even) grid 1u32 block 1u32;
            }
        }
        stage solve on main {
            fill residual = start;
            while residual > 0.5f32 max 2 {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
            }
        }
    }
}

/// A step that fails once its stages started (here its loop stops at its limit) counts for
/// `step`, eagerly as in replays: four steps whose first fails bump `even` on steps 0 and 2
/// both ways (an eager step that failed did not count, so its successor ran as step 0 again).
fn a_failed_step_still_counts_for_step(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let starts = [5.0f32, 1.0, 1.0, 1.0];
    let mut residual = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let (mut eager, mut replayed) = (
        DeviceBuffer::<f32>::zeros(&stream, 1).unwrap(),
        DeviceBuffer::<f32>::zeros(&stream, 1).unwrap(),
    );
    stream.synchronize().unwrap();
    let mut pipeline = Counted::new(ctx).unwrap();
    for (step, start) in starts.into_iter().enumerate() {
        let params = CountedParams {
            start,
            even: &mut eager,
            residual: &mut residual,
        };
        let outcome = pipeline.run(params).and_then(|guard| guard.wait());
        assert_eq!(outcome.is_ok(), step > 0, "eager step {step}: {outcome:?}");
    }
    let mut pipeline = Counted::new(ctx).unwrap();
    let mut graph = pipeline
        .capture(CountedParams {
            start: 1.0,
            even: &mut replayed,
            residual: &mut residual,
        })
        .unwrap();
    for (step, start) in starts.into_iter().enumerate() {
        graph.set_start(start).unwrap();
        graph.launch().unwrap();
        let outcome = graph.synchronize();
        assert_eq!(outcome.is_ok(), step > 0, "replay {step}: {outcome:?}");
    }
    drop(graph);
    assert_eq!(read(&stream, &eager), 2.0, "eager");
    assert_eq!(read(&stream, &replayed), 2.0, "replayed");
}
