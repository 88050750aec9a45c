//! Conditions kernels set themselves (`Graph::condition_handle`, `Condition::set_by_kernel`,
//! a `SetsCondition` parameter): `while`, `do ... while`, `if`/`else` and `switch` nodes with no
//! condition kernel of the library, each on the checked CPU backend and, `#[ignore = "needs a
//! CUDA GPU"]`, on a GPU; and the misuses the runtime refuses (a handle set from another graph
//! or scope, from a stream, given to a node it was not made for, or to two nodes). Also the
//! ping-pong loop (`add_ping_pong_while_node`): a body that swaps buffers, unrolled by two.

use gpu_pipeline::{
    Comparison, Condition, ConditionHandle, Context, CpuKernel, DeviceBuffer, Error, Graph,
    HandleKind, LaunchConfig, Module, PinnedBuffer, SetsCondition, Stream, TypedKernel,
};

// The kernels' CPU twins.
use tests::condition_kernels as cpu;

type CountDown = (&'static mut [u32], SetsCondition);
type SetTo = (&'static [u32], SetsCondition);
type Bump = (&'static mut [u32],);
type StepDown = (&'static [u32], &'static mut [u32], &'static mut [u32]);

struct Kernels {
    count_down: TypedKernel<CountDown>,
    set_to: TypedKernel<SetTo>,
    bump: TypedKernel<Bump>,
    step: TypedKernel<StepDown>,
}

fn kernels(ctx: &Context) -> Kernels {
    let module = Module::load_ptx(
        ctx,
        include_str!("../../runtime/kernels/condition_kernels.ptx"),
    )
    .unwrap();
    // SAFETY: each kernel (runtime/kernels/condition_kernels.cu) touches element 0 of its
    // buffers only, and sets its condition from one thread, once per launch.
    unsafe {
        Kernels {
            count_down: module
                .function("gp_count_down")
                .unwrap()
                .typed::<CountDown>()
                .unwrap()
                .with_cpu(CpuKernel::new(cpu::count_down)),
            set_to: module
                .function("gp_set_to")
                .unwrap()
                .typed::<SetTo>()
                .unwrap()
                .with_cpu(CpuKernel::new(cpu::set_to)),
            bump: module
                .function("gp_bump")
                .unwrap()
                .typed::<Bump>()
                .unwrap()
                .with_cpu(CpuKernel::new(cpu::bump)),
            step: module
                .function("gp_step")
                .unwrap()
                .typed::<StepDown>()
                .unwrap()
                .with_cpu(CpuKernel::new(cpu::step)),
        }
    }
}

fn one() -> LaunchConfig {
    LaunchConfig::new(1u32, 1u32)
}

fn read(stream: &Stream, buffer: &DeviceBuffer<u32>) -> u32 {
    buffer.to_vec(stream).unwrap()[0]
}

/// A do-while whose body's kernel counts `n` down: the body runs `n` times.
fn do_while_counts_down(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut n = DeviceBuffer::from_slice(&stream, &[4u32]).unwrap();
    let mut out = DeviceBuffer::from_slice(&stream, &[0u32]).unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let go = graph
        .condition_handle(HandleKind::DoWhile {
            max_iterations: 100,
        })
        .unwrap();
    let looping = graph
        .add_do_while_node(
            &[],
            Condition::set_by_kernel(&go).named("n > 0"),
            100,
            |b| {
                let bump = b.add_kernel_node(&[], &k.bump, one(), (&mut out,))?;
                b.add_kernel_node(&[bump.node()], &k.count_down, one(), (&mut n, &go))?;
                Ok(())
            },
        )
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    exec.check_loops().unwrap();
    assert_eq!(looping.state().iterations(), 4);
    drop((exec, graph));
    assert_eq!((read(&stream, &n), read(&stream, &out)), (0, 4));
}

/// A while whose first test a kernel before the node sets, and each later one a kernel in
/// its body; run twice, the second time with a first test that fails.
fn while_set_before_and_in_body(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut n = DeviceBuffer::from_slice(&stream, &[3u32]).unwrap();
    let mut out = DeviceBuffer::from_slice(&stream, &[0u32]).unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let go = graph
        .condition_handle(HandleKind::While {
            max_iterations: 100,
        })
        .unwrap();
    let first = graph
        .add_kernel_node(&[], &k.count_down, one(), (&mut n, &go))
        .unwrap();
    let looping = graph
        .add_while_node(&[first.node()], Condition::set_by_kernel(&go), 100, |b| {
            let bump = b.add_kernel_node(&[], &k.bump, one(), (&mut out,))?;
            b.add_kernel_node(&[bump.node()], &k.count_down, one(), (&mut n, &go))?;
            Ok(())
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    // n = 3: the node before makes it 2 (go), the body runs at n = 2 and n = 1.
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    exec.check_loops().unwrap();
    assert_eq!(looping.state().iterations(), 2);
    // n = 1: the node before makes it 0 (stop): the body does not run.
    let one_left = PinnedBuffer::from_slice(ctx, &[1u32]).unwrap();
    stream.copy_htod(&one_left, &mut n).unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    exec.check_loops().unwrap();
    assert_eq!(looping.state().iterations(), 0);
    drop((exec, graph));
    assert_eq!((read(&stream, &n), read(&stream, &out)), (0, 2));
}

/// A while that never stops stops at its maximum and reports it.
fn while_stops_at_its_maximum(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut n = DeviceBuffer::from_slice(&stream, &[100u32]).unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let go = graph
        .condition_handle(HandleKind::While { max_iterations: 3 })
        .unwrap();
    let first = graph
        .add_kernel_node(&[], &k.count_down, one(), (&mut n, &go))
        .unwrap();
    let looping = graph
        .add_while_node(
            &[first.node()],
            Condition::set_by_kernel(&go).named("go"),
            3,
            |b| {
                b.add_kernel_node(&[], &k.count_down, one(), (&mut n, &go))?;
                Ok(())
            },
        )
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(looping.state().iterations(), 3);
    match exec.check_loops() {
        Err(Error::IterationLimit {
            label,
            max_iterations,
        }) => assert_eq!((label.as_str(), max_iterations), ("go", 3)),
        other => panic!("expected IterationLimit, got {other:?}"),
    }
    drop((exec, graph));
    assert_eq!(read(&stream, &n), 96);
}

/// An if/else on a value a kernel before it sets.
fn if_else_set_by_kernel(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut value = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let mut then = DeviceBuffer::from_slice(&stream, &[0u32]).unwrap();
    let mut other = DeviceBuffer::from_slice(&stream, &[0u32]).unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let go = graph.condition_handle(HandleKind::Decision).unwrap();
    let set = graph
        .add_kernel_node(&[], &k.set_to, one(), (&value, &go))
        .unwrap();
    graph
        .add_if_else_node(
            &[set.node()],
            Condition::set_by_kernel(&go),
            |b| {
                b.add_kernel_node(&[], &k.bump, one(), (&mut then,))
                    .map(drop)
            },
            |b| {
                b.add_kernel_node(&[], &k.bump, one(), (&mut other,))
                    .map(drop)
            },
        )
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    let zero = PinnedBuffer::from_slice(ctx, &[0u32]).unwrap();
    stream.copy_htod(&zero, &mut value).unwrap();
    exec.launch(&stream).unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    drop((exec, graph));
    assert_eq!((read(&stream, &then), read(&stream, &other)), (1, 2));
}

/// A switch on a value a kernel before it sets; a value past the cases runs none.
fn switch_set_by_kernel(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut value = DeviceBuffer::from_slice(&stream, &[0u32]).unwrap();
    let mut counts = [
        DeviceBuffer::from_slice(&stream, &[0u32]).unwrap(),
        DeviceBuffer::from_slice(&stream, &[0u32]).unwrap(),
        DeviceBuffer::from_slice(&stream, &[0u32]).unwrap(),
    ];
    let mut graph = Graph::new(ctx).unwrap();
    let pick = graph.condition_handle(HandleKind::Decision).unwrap();
    let set = graph
        .add_kernel_node(&[], &k.set_to, one(), (&value, &pick))
        .unwrap();
    graph
        .add_switch_node(&[set.node()], Condition::set_by_kernel(&pick), 3, |n, b| {
            b.add_kernel_node(&[], &k.bump, one(), (&mut counts[n],))
                .map(drop)
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    for v in [0u32, 2, 2, 7, 1, 2] {
        let staged = PinnedBuffer::from_slice(ctx, &[v]).unwrap();
        stream.copy_htod(&staged, &mut value).unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
    }
    drop((exec, graph));
    let got: Vec<u32> = counts.iter().map(|c| read(&stream, c)).collect();
    assert_eq!(got, [1, 1, 3]);
}

/// What the runtime refuses: a handle set from a stream, from another graph, from a scope
/// that cannot see it; a handle given to a node of another kind, to a second node, or an
/// eager handle given to a node.
fn misuse_is_refused(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut n = DeviceBuffer::from_slice(&stream, &[3u32]).unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let go = graph
        .condition_handle(HandleKind::While { max_iterations: 5 })
        .unwrap();
    // From a stream.
    let e = k
        .count_down
        .launch(&stream, one(), (&mut n, &go))
        .unwrap_err();
    assert!(e.to_string().contains("outside that graph"), "{e}");
    // From another graph.
    let mut other = Graph::new(ctx).unwrap();
    let e = other
        .add_kernel_node(&[], &k.count_down, one(), (&mut n, &go))
        .unwrap_err();
    assert!(e.to_string().contains("another graph"), "{e}");
    // A node of another kind.
    let e = graph
        .add_if_node(&[], Condition::set_by_kernel(&go), |_| Ok(()))
        .unwrap_err();
    assert!(e.to_string().contains("not for this kind of node"), "{e}");
    // Another maximum.
    let e = graph
        .add_while_node(&[], Condition::set_by_kernel(&go), 6, |_| Ok(()))
        .unwrap_err();
    assert!(e.to_string().contains("same maximum"), "{e}");
    // From a body of another node.
    let inner = graph.condition_handle(HandleKind::Decision).unwrap();
    let e = graph
        .add_while_node(&[], Condition::set_by_kernel(&go), 5, |b| {
            b.add_kernel_node(&[], &k.count_down, one(), (&mut n, &inner))
                .map(drop)
        })
        .unwrap_err();
    assert!(e.to_string().contains("another scope"), "{e}");
    // A handle decides one node.
    let mut graph = Graph::new(ctx).unwrap();
    let once = graph.condition_handle(HandleKind::Decision).unwrap();
    graph
        .add_if_node(&[], Condition::set_by_kernel(&once), |_| Ok(()))
        .unwrap();
    let e = graph
        .add_if_node(&[], Condition::set_by_kernel(&once), |_| Ok(()))
        .unwrap_err();
    assert!(e.to_string().contains("decides another node"), "{e}");
    // Beside its node once the node is added: after it, or alongside it.
    let mut graph = Graph::new(ctx).unwrap();
    let looping = graph
        .condition_handle(HandleKind::While { max_iterations: 5 })
        .unwrap();
    let first = graph
        .add_kernel_node(&[], &k.count_down, one(), (&mut n, &looping))
        .unwrap();
    let node = graph
        .add_while_node(
            &[first.node()],
            Condition::set_by_kernel(&looping),
            5,
            |b| {
                b.add_kernel_node(&[], &k.count_down, one(), (&mut n, &looping))
                    .map(drop)
            },
        )
        .unwrap();
    for dependencies in [vec![node.node()], vec![]] {
        let e = graph
            .add_kernel_node(&dependencies, &k.count_down, one(), (&mut n, &looping))
            .unwrap_err();
        assert!(e.to_string().contains("added already"), "{e}");
    }
    // A node that sets a condition keeps its arguments.
    let mut graph = Graph::new(ctx).unwrap();
    let decide = graph.condition_handle(HandleKind::Decision).unwrap();
    let value = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let setter = graph
        .add_kernel_node(&[], &k.set_to, one(), (&value, &decide))
        .unwrap();
    graph
        .add_if_node(&[setter.node()], Condition::set_by_kernel(&decide), |_| {
            Ok(())
        })
        .unwrap();
    let mut exec = graph.instantiate().unwrap();
    let e = exec
        .set_kernel_params(&setter, &k.set_to, one(), (&value, &decide))
        .unwrap_err();
    assert!(e.to_string().contains("keeps the arguments"), "{e}");
    drop(exec);
    // An eager handle belongs to no graph.
    let eager = ConditionHandle::eager(ctx).unwrap();
    let e = graph
        .add_if_node(&[], Condition::set_by_kernel(&eager), |_| Ok(()))
        .unwrap_err();
    assert!(e.to_string().contains("eager handle"), "{e}");
}

/// An eager handle: a kernel launched on a stream writes the value to its word.
fn eager_handle_writes_its_word(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut n = DeviceBuffer::from_slice(&stream, &[2u32]).unwrap();
    let go = ConditionHandle::eager(ctx).unwrap();
    k.count_down.launch(&stream, one(), (&mut n, &go)).unwrap();
    assert_eq!(go.word().to_vec(&stream).unwrap()[0], 1);
    k.count_down.launch(&stream, one(), (&mut n, &go)).unwrap();
    assert_eq!(go.word().to_vec(&stream).unwrap()[0], 0);
}

/// A ping-pong loop: `a -> b` and `b -> a` alternate while `r > 0`; after an odd count the
/// last body's output is copied from `b` into `a`, so `a` holds the result either way.
fn ping_pong_alternates_and_puts_the_result_back(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    for (start, first_test, iterations) in [
        (5u32, true, 5),
        (4, true, 4),
        (0, true, 0),
        (1, false, 1),
        (4, false, 4),
    ] {
        let mut a = DeviceBuffer::from_slice(&stream, &[start]).unwrap();
        let mut b = DeviceBuffer::from_slice(&stream, &[77u32]).unwrap();
        let mut r = DeviceBuffer::from_slice(&stream, &[start]).unwrap();
        let mut graph = Graph::new(ctx).unwrap();
        let looping = graph
            .add_ping_pong_while_node(
                &[],
                Condition::compare(&r, Comparison::Greater, 0u32),
                first_test,
                100,
                |n, body| {
                    match n {
                        0 => body.add_kernel_node(&[], &k.step, one(), (&a, &mut b, &mut r))?,
                        1 => body.add_kernel_node(&[], &k.step, one(), (&b, &mut a, &mut r))?,
                        _ => return body.add_copy_dtod_node(&[], &b, &mut a).map(drop),
                    };
                    Ok(())
                },
            )
            .unwrap();
        let exec = graph.instantiate().unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        exec.check_loops().unwrap();
        assert_eq!(looping.state().iterations(), iterations, "from {start}");
        drop((exec, graph));
        let expected = start.wrapping_sub(iterations);
        assert_eq!(read(&stream, &a), expected, "from {start}");
    }
}

/// A kernel-set `while` and `do ... while` (maximum 3) launched again and again from new
/// starts of their counters: after every launch each state holds that launch's count (also
/// when it repeats the last one, or is 0) and its mark when it stopped at its maximum, which
/// the check clears.
fn kernel_set_loop_states_follow_every_launch(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut a = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let mut b = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let go = graph
        .condition_handle(HandleKind::While { max_iterations: 3 })
        .unwrap();
    let first = graph
        .add_kernel_node(&[], &k.count_down, one(), (&mut a, &go))
        .unwrap();
    let looping = graph
        .add_while_node(
            &[first.node()],
            Condition::set_by_kernel(&go).named("a > 0"),
            3,
            |body| {
                body.add_kernel_node(&[], &k.count_down, one(), (&mut a, &go))?;
                Ok(())
            },
        )
        .unwrap();
    let again = graph
        .condition_handle(HandleKind::DoWhile { max_iterations: 3 })
        .unwrap();
    let once = graph
        .add_do_while_node(
            &[],
            Condition::set_by_kernel(&again).named("b > 0"),
            3,
            |body| {
                body.add_kernel_node(&[], &k.count_down, one(), (&mut b, &again))?;
                Ok(())
            },
        )
        .unwrap();
    let exec = graph.instantiate().unwrap();
    for start in [3u32, 3, 1, 1, 100, 100, 2, 4, 4, 1] {
        let staged = PinnedBuffer::from_slice(ctx, &[start]).unwrap();
        stream.copy_htod(&staged, &mut a).unwrap();
        stream.copy_htod(&staged, &mut b).unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        // The while: the kernel before it counts once, each iteration once more.
        let expected = [
            (looping.state(), (start - 1).min(3), start - 1 > 3),
            (once.state(), start.min(3), start > 3),
        ];
        for (state, iterations, hit) in expected {
            let at = format!("{} from {start}", state.label());
            assert_eq!(state.iterations(), iterations, "{at}");
            assert_eq!(state.check().is_err(), hit, "{at}");
            assert!(!state.hit_limit(), "{at}: the check clears the mark");
        }
    }
}

/// A ping-pong loop (maximum 4) launched again and again from new starts, with and without
/// the test before its first iteration: after every launch its state holds that launch's
/// count (also when it repeats the last one, or is 0) and its mark when it stopped at its
/// maximum, which the check clears; `a` holds the result of every run that ended by itself.
fn ping_pong_states_follow_every_launch(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    for first_test in [true, false] {
        let mut a = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
        let mut b = DeviceBuffer::from_slice(&stream, &[0u32]).unwrap();
        let mut r = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
        let mut graph = Graph::new(ctx).unwrap();
        let looping = graph
            .add_ping_pong_while_node(
                &[],
                Condition::compare(&r, Comparison::Greater, 0u32).named("r > 0"),
                first_test,
                4,
                |n, body| {
                    match n {
                        0 => body.add_kernel_node(&[], &k.step, one(), (&a, &mut b, &mut r))?,
                        1 => body.add_kernel_node(&[], &k.step, one(), (&b, &mut a, &mut r))?,
                        _ => return body.add_copy_dtod_node(&[], &b, &mut a).map(drop),
                    };
                    Ok(())
                },
            )
            .unwrap();
        let exec = graph.instantiate().unwrap();
        // A do-while from 0 would wrap `r` below 0: its starts are at least 1.
        let starts: &[u32] = if first_test {
            &[3, 3, 0, 0, 10, 10, 2, 4, 4, 0]
        } else {
            &[3, 3, 1, 1, 10, 10, 2, 4, 4, 1]
        };
        for &start in starts {
            let staged = PinnedBuffer::from_slice(ctx, &[start]).unwrap();
            stream.copy_htod(&staged, &mut a).unwrap();
            stream.copy_htod(&staged, &mut r).unwrap();
            exec.launch(&stream).unwrap();
            stream.synchronize().unwrap();
            let state = looping.state();
            let at = format!("from {start}, first test {first_test}");
            assert_eq!(state.iterations(), start.min(4), "{at}");
            assert_eq!(state.check().is_err(), start > 4, "{at}");
            assert!(!state.hit_limit(), "{at}: the check clears the mark");
            if start <= 4 {
                assert_eq!(read(&stream, &a), 0, "{at}");
            }
        }
    }
}

tests::on_both_backends! {
    ping_pong_alternates_and_puts_the_result_back,
    do_while_counts_down,
    while_set_before_and_in_body,
    while_stops_at_its_maximum,
    if_else_set_by_kernel,
    switch_set_by_kernel,
    misuse_is_refused,
    eager_handle_writes_its_word,
    kernel_set_loop_states_follow_every_launch,
    ping_pong_states_follow_every_launch,
}
