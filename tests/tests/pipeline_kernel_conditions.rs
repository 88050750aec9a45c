//! Conditions kernels set themselves in `gpu_pipeline!` (`scratch { go: Condition }`, a kernel
//! parameter declared `Condition`, and `while go`, `do { .. } while go`, `if go`, `switch go`):
//! each eagerly (the host reads the value the kernel wrote) and as a built graph (the kernel
//! sets the conditional node's handle: no condition kernel of the library), on the checked CPU
//! backend and, `#[ignore = "needs a CUDA GPU"]`, on a GPU, where the nodes are counted too.

use gpu_pipeline::{ConditionSetter, Context, DeviceBuffer, Error, Stream, gpu_pipeline};

// The kernels' CPU twins.
use tests::condition_kernels as cpu;

gpu_pipeline! {
    /// Bumps `out` while counting `n` down, the kernel that counts deciding each test: a
    /// do-while (at least once) and a while (its first test set before the loop).
    pipeline Countdown {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_count_down(n: &mut [u32; unbounded], go: Condition) cpu = cpu::count_down;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params {
            limit: u32,
            n: &mut DeviceBuffer<u32>,
            m: &mut DeviceBuffer<u32>,
            out: &mut DeviceBuffer<u32>,
            more: &mut DeviceBuffer<u32>,
        }
        scratch { again: Condition, go: Condition }
        stage first on main {
            do {
                launch k::gp_bump(out) grid 1u32 block 1u32;
                launch k::gp_count_down(n, again) grid 1u32 block 1u32;
            } while again max limit;
        }
        stage second on main {
            launch k::gp_count_down(m, go) grid 1u32 block 1u32;
            while go max limit {
                launch k::gp_bump(more) grid 1u32 block 1u32;
                launch k::gp_count_down(m, go) grid 1u32 block 1u32;
            }
        }
    }
}

gpu_pipeline! {
    /// `if`/`else` and `switch` on values a kernel sets just before them.
    pipeline Decide {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = cpu::set_to;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params {
            flag: &mut DeviceBuffer<u32>,
            mode: &mut DeviceBuffer<u32>,
            then: &mut DeviceBuffer<u32>,
            other: &mut DeviceBuffer<u32>,
            cases: &mut [DeviceBuffer<u32>],
        }
        scratch { yes: Condition, pick: Condition }
        stage branch on main {
            launch k::gp_set_to(flag, yes) grid 1u32 block 1u32;
            if yes {
                launch k::gp_bump(then) grid 1u32 block 1u32;
            } else {
                launch k::gp_bump(other) grid 1u32 block 1u32;
            }
        }
        stage choose on main {
            launch k::gp_set_to(mode, pick) grid 1u32 block 1u32;
            switch pick {
                0 => { launch k::gp_bump(cases[0]) grid 1u32 block 1u32; }
                1 => { launch k::gp_bump(cases[1]) grid 1u32 block 1u32; }
                2 => { launch k::gp_bump(cases[2]) grid 1u32 block 1u32; }
            }
        }
    }
}

gpu_pipeline! {
    /// An `if`/`else` whose two bodies write one buffer (each branch's graph body is built by
    /// one closure: two would each borrow the buffer exclusively).
    pipeline OneBuffer {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = cpu::set_to;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params { flag: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        scratch { yes: Condition }
        stage branch on main {
            launch k::gp_set_to(flag, yes) grid 1u32 block 1u32;
            if yes {
                launch k::gp_bump(out) grid 1u32 block 1u32;
            } else {
                launch k::gp_bump(out) grid 1u32 block 1u32;
                launch k::gp_bump(out) grid 1u32 block 1u32;
            }
        }
    }
}

gpu_pipeline! {
    /// One `Condition` tested in each of two kinds of step: each kind is a graph of its own,
    /// with its own handle for `go` (the checker refused this as two tests of one handle).
    pipeline TwoKinds {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_count_down(n: &mut [u32; unbounded], go: Condition) cpu = cpu::count_down;
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = cpu::set_to;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params { n: &mut DeviceBuffer<u32>, flag: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        step count {
            stage counting on main {
                do {
                    launch k::gp_bump(out) grid 1u32 block 1u32;
                    launch k::gp_count_down(n, go) grid 1u32 block 1u32;
                } while go max 100u32;
            }
        }
        step decide {
            stage deciding on main {
                launch k::gp_set_to(flag, go) grid 1u32 block 1u32;
                if go {
                    launch k::gp_bump(out) grid 1u32 block 1u32;
                }
            }
        }
    }
}

/// `count` bumps `out` `n` times, `decide` once when `flag` is set: each kind with its own
/// test of `go`, eagerly and replayed from the graphs of both kinds.
fn one_condition_tested_in_two_kinds_of_step(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let (mut n, mut flag, mut out) = (
        DeviceBuffer::from_slice(&stream, &[3u32]).unwrap(),
        DeviceBuffer::from_slice(&stream, &[1u32]).unwrap(),
        DeviceBuffer::<u32>::zeros(&stream, 1).unwrap(),
    );
    stream.synchronize().unwrap();
    let mut pipeline = TwoKinds::new(ctx).unwrap();
    pipeline
        .run_count(TwoKindsParams {
            n: &mut n,
            flag: &mut flag,
            out: &mut out,
        })
        .and_then(|guard| guard.wait())
        .unwrap();
    pipeline
        .run_decide(TwoKindsParams {
            n: &mut n,
            flag: &mut flag,
            out: &mut out,
        })
        .and_then(|guard| guard.wait())
        .unwrap();
    assert_eq!(
        read(&stream, &out),
        4,
        "eager: 3 bumps counting down, 1 deciding"
    );
    set(&stream, &mut n, 2);
    {
        let mut graph = pipeline
            .capture(TwoKindsParams {
                n: &mut n,
                flag: &mut flag,
                out: &mut out,
            })
            .unwrap();
        graph.launch_count().unwrap();
        graph.launch_decide().unwrap();
        graph.launch_decide().unwrap();
        graph.synchronize().unwrap();
    }
    assert_eq!(
        read(&stream, &out),
        8,
        "replayed: 2 bumps counting down, 2 deciding"
    );
    assert_eq!(read(&stream, &n), 0);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

fn read(stream: &Stream, buffer: &DeviceBuffer<u32>) -> u32 {
    buffer.to_vec(stream).unwrap()[0]
}

fn set(stream: &Stream, buffer: &mut DeviceBuffer<u32>, value: u32) {
    *buffer = DeviceBuffer::from_slice(stream, &[value]).unwrap();
    stream.synchronize().unwrap();
}

/// The do-while runs its body `n` times (at least once), the while `m - 1` times (its first
/// test follows the count before the loop); eagerly and as a graph; both stop with the named
/// error at their maximum.
fn loops_that_kernels_decide(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let (mut n, mut m, mut out, mut more) = (
        DeviceBuffer::<u32>::zeros(&stream, 1).unwrap(),
        DeviceBuffer::<u32>::zeros(&stream, 1).unwrap(),
        DeviceBuffer::<u32>::zeros(&stream, 1).unwrap(),
        DeviceBuffer::<u32>::zeros(&stream, 1).unwrap(),
    );
    stream.synchronize().unwrap();
    let mut pipeline = Countdown::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    macro_rules! params {
        ($limit:expr) => {
            CountdownParams {
                limit: $limit,
                n: &mut n,
                m: &mut m,
                out: &mut out,
                more: &mut more,
            }
        };
    }
    // Eagerly: n = 3 -> 3 bumps; m = 3 -> 2 bumps; then m = 1 -> none.
    set(&stream, &mut n, 3);
    set(&stream, &mut m, 3);
    pipeline.run(params!(100)).unwrap().wait().unwrap();
    assert_eq!((read(&stream, &out), read(&stream, &more)), (3, 2));
    set(&stream, &mut n, 1);
    set(&stream, &mut m, 1);
    pipeline.run(params!(100)).unwrap().wait().unwrap();
    assert_eq!((read(&stream, &out), read(&stream, &more)), (4, 2));
    // The maximum: n = 10 with at most 2 iterations.
    set(&stream, &mut n, 10);
    set(&stream, &mut m, 1);
    match pipeline.run(params!(2)).map(|run| run.wait()) {
        Err(Error::Stage { source, .. }) => assert!(
            matches!(*source, Error::IterationLimit { max_iterations: 2, ref label } if label == "again"),
            "{source}"
        ),
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    ctx.synchronize().unwrap();
    assert_eq!(read(&stream, &out), 6);

    // As a graph.
    set(&stream, &mut n, 4);
    set(&stream, &mut m, 5);
    let mut graph = pipeline.capture(params!(100)).unwrap();
    if ctx.handle().is_some() {
        // The do-while is one WHILE node; the while one WHILE node after the kernel that
        // sets its first test: no condition kernel of the library.
        assert_eq!(graph.node_count().unwrap(), 3);
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
    assert_eq!(loops, [4, 4]);
    drop(graph);
    assert_eq!((read(&stream, &out), read(&stream, &more)), (10, 6));
    set(&stream, &mut n, 10);
    set(&stream, &mut m, 10);
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
    assert_eq!((read(&stream, &out), read(&stream, &more)), (13, 9));
}

/// An `if`/`else` and a `switch` on values kernels set, eagerly and in replays.
fn decisions_that_kernels_make(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let zero = || DeviceBuffer::<u32>::zeros(&stream, 1).unwrap();
    let (mut flag, mut mode, mut then, mut other) = (zero(), zero(), zero(), zero());
    let mut cases = [zero(), zero(), zero()];
    stream.synchronize().unwrap();
    let mut pipeline = Decide::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    macro_rules! params {
        () => {
            DecideParams {
                flag: &mut flag,
                mode: &mut mode,
                then: &mut then,
                other: &mut other,
                cases: &mut cases,
            }
        };
    }
    for (f, p) in [(1, 0), (0, 2), (5, 7), (0, 1)] {
        set(&stream, &mut flag, f);
        set(&stream, &mut mode, p);
        pipeline.run(params!()).unwrap().wait().unwrap();
    }
    let counts = |cases: &[DeviceBuffer<u32>]| -> Vec<u32> {
        cases.iter().map(|c| read(&stream, c)).collect()
    };
    assert_eq!((read(&stream, &then), read(&stream, &other)), (2, 2));
    assert_eq!(counts(&cases), [1, 1, 1]);
    set(&stream, &mut flag, 0);
    set(&stream, &mut mode, 2);
    let mut graph = pipeline.capture(params!()).unwrap();
    if ctx.handle().is_some() {
        // Per stage: the kernel that sets the value, and one IF (two bodies) or SWITCH node
        // (CUDA 12.8+ drivers).
        assert_eq!(graph.node_count().unwrap(), 4, "a CUDA 12.8+ driver");
    }
    graph.launch().unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!((read(&stream, &then), read(&stream, &other)), (2, 4));
    assert_eq!(counts(&cases), [1, 1, 3]);
}

/// Both branches of an `if`/`else` may write one buffer, eagerly and in a graph.
fn both_branches_write_one_buffer(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut flag = DeviceBuffer::<u32>::zeros(&stream, 1).unwrap();
    let mut out = DeviceBuffer::<u32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = OneBuffer::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    for f in [1, 0] {
        set(&stream, &mut flag, f);
        pipeline
            .run(OneBufferParams {
                flag: &mut flag,
                out: &mut out,
            })
            .unwrap()
            .wait()
            .unwrap();
    }
    assert_eq!(read(&stream, &out), 3);
    let mut graph = pipeline
        .capture(OneBufferParams {
            flag: &mut flag,
            out: &mut out,
        })
        .unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!(read(&stream, &out), 5);
}

/// The CPU twin receives a typed setter (a compile-time check of the signature it gets).
#[allow(dead_code)]
fn setter_type(go: &mut ConditionSetter<'_>) {
    go.set(1);
}

tests::on_both_backends!(
    loops_that_kernels_decide,
    decisions_that_kernels_make,
    both_branches_write_one_buffer,
    a_loop_allowed_no_iteration_is_refused_naming_it,
    one_condition_tested_in_two_kinds_of_step,
);

/// `max 0` from a param: refused before anything runs, eagerly and when the step is captured,
/// with one message that names the loop as written (it named `while` for a do-while, or an
/// inner API when captured).
fn a_loop_allowed_no_iteration_is_refused_naming_it(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut buffers: Vec<DeviceBuffer<u32>> = (0..4)
        .map(|_| DeviceBuffer::<u32>::zeros(&stream, 1).unwrap())
        .collect();
    stream.synchronize().unwrap();
    let [n, m, out, more] = &mut buffers[..] else {
        unreachable!("four buffers")
    };
    let mut pipeline = Countdown::new(ctx).unwrap();
    let eager = pipeline
        .run(CountdownParams {
            limit: 0,
            n: &mut *n,
            m: &mut *m,
            out: &mut *out,
            more: &mut *more,
        })
        .and_then(|guard| guard.wait())
        .unwrap_err()
        .to_string();
    let captured = match pipeline.capture(CountdownParams {
        limit: 0,
        n,
        m,
        out,
        more,
    }) {
        Ok(_) => panic!("a capture with `max 0` was accepted"),
        Err(e) => e.to_string(),
    };
    for message in [eager, captured] {
        assert!(
            message.contains("`do ... while again max 0` can run no iteration"),
            "{message}"
        );
    }
}
