//! The conditional forms beyond `while`/`if`: `if`/`else`, `switch` and `do ... while`, each
//! eagerly (the host decides) and as a built graph (the device decides), on the checked CPU
//! backend and, `#[ignore = "needs a CUDA GPU"]`, on a GPU, where each form is also counted:
//! on a CUDA 12.8+ driver an `if`/`else` is one IF node with two bodies and a switch one
//! SWITCH node, each after one condition kernel; a do-while is one WHILE node with no kernel
//! before it.

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

gpu_pipeline! {
    /// Adds 1 to `then` when `flag != 0`, else 10 to `other`.
    pipeline Branch {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            flag: &mut DeviceBuffer<u32>,
            then: &mut DeviceBuffer<f32>,
            other: &mut DeviceBuffer<f32>,
        }
        stage decide on main {
            if flag != 0u32 {
                launch k::add_scalar(1u32, 1.0f32, then) grid 1u32 block 1u32;
            } else {
                launch k::add_scalar(1u32, 10.0f32, other) grid 1u32 block 1u32;
            }
        }
    }
}

gpu_pipeline! {
    /// Adds `10^mode` to `out` (mode 0, 1 or 2); case 1 also sets `mode` to 0, which must not
    /// run case 0 as well.
    pipeline Pick {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            mode: &mut DeviceBuffer<u32>,
            out: &mut DeviceBuffer<f32>,
        }
        stage pick on main {
            switch mode {
                1 => {
                    launch k::add_scalar(1u32, 10.0f32, out) grid 1u32 block 1u32;
                    fill mode = 0u32;
                }
                0 => { launch k::add_scalar(1u32, 1.0f32, out) grid 1u32 block 1u32; }
                2 => { launch k::add_scalar(1u32, 100.0f32, out) grid 1u32 block 1u32; }
            }
        }
    }
}

gpu_pipeline! {
    /// Lowers `residual` by one per iteration, at least once, while it is above `tol`.
    pipeline Descend {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            tol: f32,
            limit: u32,
            residual: &mut DeviceBuffer<f32>,
            iterations: &mut DeviceBuffer<f32>,
        }
        stage solve on main {
            do {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
                launch k::add_scalar(1u32, 1.0f32, iterations) grid 1u32 block 1u32;
            } while residual > tol max limit;
        }
    }
}

fn read(stream: &Stream, buffer: &DeviceBuffer<f32>) -> f32 {
    buffer.to_vec(stream).unwrap()[0]
}

fn set_u32(stream: &Stream, buffer: &mut DeviceBuffer<u32>, value: u32) {
    *buffer = DeviceBuffer::from_slice(stream, &[value]).unwrap();
    stream.synchronize().unwrap();
}

fn set_f32(stream: &Stream, buffer: &mut DeviceBuffer<f32>, value: f32) {
    *buffer = DeviceBuffer::from_slice(stream, &[value]).unwrap();
    stream.synchronize().unwrap();
}

/// Each branch runs exactly when it should, eagerly and in replays of one built graph
/// whose flag the host changes between replays.
fn if_else_runs_one_branch(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut flag = DeviceBuffer::<u32>::zeros(&stream, 1).unwrap();
    let mut then = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut other = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Branch::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    for value in [1, 0] {
        set_u32(&stream, &mut flag, value);
        let params = BranchParams {
            flag: &mut flag,
            then: &mut then,
            other: &mut other,
        };
        pipeline.run(params).unwrap().wait().unwrap();
    }
    assert_eq!((read(&stream, &then), read(&stream, &other)), (1.0, 10.0));

    let mut graph = pipeline
        .capture(BranchParams {
            flag: &mut flag,
            then: &mut then,
            other: &mut other,
        })
        .unwrap();
    // flag is 0: the else branch, twice.
    graph.launch().unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    if ctx.handle().is_some() {
        // One condition kernel and one IF node with two bodies (CUDA 12.8+ drivers; two
        // kernels and two IF nodes before).
        assert_eq!(graph.node_count().unwrap(), 2, "a CUDA 12.8+ driver");
    }
    drop(graph);
    assert_eq!((read(&stream, &then), read(&stream, &other)), (1.0, 30.0));
    set_u32(&stream, &mut flag, 7);
    let mut graph = pipeline
        .capture(BranchParams {
            flag: &mut flag,
            then: &mut then,
            other: &mut other,
        })
        .unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!((read(&stream, &then), read(&stream, &other)), (2.0, 30.0));
}

/// A switch runs the case its value names and only that one (case 1 zeroes the value, which
/// does not then run case 0), none for a value out of range; eagerly and as a graph.
fn switch_runs_the_named_case(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut mode = DeviceBuffer::<u32>::zeros(&stream, 1).unwrap();
    let mut out = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Pick::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    let mut expected = 0.0;
    for (value, adds) in [(0, 1.0), (1, 10.0), (2, 100.0), (3, 0.0), (u32::MAX, 0.0)] {
        set_u32(&stream, &mut mode, value);
        pipeline
            .run(PickParams {
                mode: &mut mode,
                out: &mut out,
            })
            .unwrap()
            .wait()
            .unwrap();
        expected += adds;
        assert_eq!(read(&stream, &out), expected, "eager, mode {value}");
    }
    for (value, adds) in [(2, 100.0), (1, 10.0), (0, 1.0), (3, 0.0)] {
        set_u32(&stream, &mut mode, value);
        let mut graph = pipeline
            .capture(PickParams {
                mode: &mut mode,
                out: &mut out,
            })
            .unwrap();
        graph.launch().unwrap();
        graph.synchronize().unwrap();
        if ctx.handle().is_some() {
            // One condition kernel and one SWITCH node (CUDA 12.8+ drivers).
            assert_eq!(graph.node_count().unwrap(), 2, "a CUDA 12.8+ driver");
        }
        drop(graph);
        expected += adds;
        assert_eq!(read(&stream, &out), expected, "graph, mode {value}");
    }
}

/// How `Descend` stopping at a maximum of 3 reads, eagerly and as a graph.
const DESCEND_LIMIT: &str = "pipeline `Descend`, stage `solve`: the device loop `residual > tol` \
                             stopped after its maximum of 3 iterations with its condition still \
                             holding; raise its maximum, or find out why it does not converge";

/// A do-while runs its body before the first test: once when already converged, `n` times
/// from `n`, and stops with the named error at its maximum; eagerly and as a graph.
fn do_while_runs_its_body_first(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut residual = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut iterations = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Descend::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    macro_rules! params {
        ($limit:expr) => {
            DescendParams {
                tol: 0.5,
                limit: $limit,
                residual: &mut residual,
                iterations: &mut iterations,
            }
        };
    }
    // From 5: 5 iterations; from 0 (converged): still 1.
    set_f32(&stream, &mut residual, 5.0);
    pipeline.run(params!(100)).unwrap().wait().unwrap();
    assert_eq!(read(&stream, &iterations), 5.0);
    set_f32(&stream, &mut residual, 0.0);
    pipeline.run(params!(100)).unwrap().wait().unwrap();
    assert_eq!(read(&stream, &iterations), 6.0);
    // The limit: 3 iterations from 5 leave 2 > tol.
    set_f32(&stream, &mut residual, 5.0);
    match pipeline.run(params!(3)).map(|run| run.wait()) {
        Err(e @ Error::Stage { .. }) => {
            // The same text as the captured step's, below.
            assert_eq!(e.to_string(), DESCEND_LIMIT);
            let Error::Stage { source, .. } = e else {
                unreachable!()
            };
            assert!(
                matches!(*source, Error::IterationLimit { max_iterations: 3, ref label } if label == "residual > tol"),
                "{source}"
            );
        }
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    ctx.synchronize().unwrap();
    assert_eq!(read(&stream, &iterations), 9.0);

    // As a graph: from 5, then from 0 (one iteration), then the limit.
    set_f32(&stream, &mut residual, 5.0);
    let mut graph = pipeline.capture(params!(100)).unwrap();
    if ctx.handle().is_some() {
        // One WHILE node and nothing before it (its handle starts each launch at 1).
        assert_eq!(graph.node_count().unwrap(), 1);
    }
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    let exec = graph.exec().expect("the step is captured");
    assert_eq!(exec.loops()[0].iterations(), 5);
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    assert_eq!(graph.exec().unwrap().loops()[0].iterations(), 1);
    drop(graph);
    assert_eq!(read(&stream, &iterations), 15.0);
    set_f32(&stream, &mut residual, 5.0);
    let mut graph = pipeline.capture(params!(3)).unwrap();
    graph.launch().unwrap();
    match graph.synchronize() {
        Err(e @ Error::Step { .. }) => {
            // Named as the eager step names it: the loop's stage, not a fault.
            assert_eq!(e.to_string(), DESCEND_LIMIT);
            let Error::Step { stage, source, .. } = e else {
                unreachable!()
            };
            assert_eq!(stage, Some("solve"));
            assert!(matches!(
                *source,
                Error::IterationLimit {
                    max_iterations: 3,
                    ..
                }
            ));
        }
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    // The count restarts at 0 in the next launch (the kernel zeroes it when a loop ends):
    // from the 2 the limit left, 2 iterations.
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    assert_eq!(graph.exec().unwrap().loops()[0].iterations(), 2);
    drop(graph);
    assert_eq!(read(&stream, &iterations), 20.0);
}

tests::on_both_backends!(
    if_else_runs_one_branch,
    switch_runs_the_named_case,
    do_while_runs_its_body_first,
    each_loop_limit_is_reported_once,
);

gpu_pipeline! {
    /// Two kinds of step, each a do-while that counts `residual` down by 1 at most 2 times.
    pipeline TwoKinds {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = crate::cpu::add_scalar;
        }
        params { residual: &mut DeviceBuffer<f32> }
        step first {
            stage down on main {
                do {
                    launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
                } while residual > 0.5f32 max 2u32;
            }
        }
        step second {
            stage again on main {
                do {
                    launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
                } while residual > 0.5f32 max 2u32;
            }
        }
    }
}

/// Both kinds of a graph stop at their maximum: one synchronize reports it (the first kind's)
/// and clears both marks, so the next synchronize, with nothing new launched, is clean.
fn each_loop_limit_is_reported_once(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut residual = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    set_f32(&stream, &mut residual, 10.0);
    let mut pipeline = TwoKinds::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    let mut graph = pipeline
        .capture(TwoKindsParams {
            residual: &mut residual,
        })
        .unwrap();
    graph.launch_first().unwrap();
    graph.launch_second().unwrap();
    match graph.synchronize() {
        Err(Error::Step {
            stage: Some("down"),
            ..
        }) => {}
        other => panic!("expected the first kind's limit, got {other:?}"),
    }
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!(read(&stream, &residual), 6.0);
}
