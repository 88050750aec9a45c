//! Graphs built node by node (kernels, copies, memsets, host functions, events, child graphs,
//! captured work) and device-side `while` / `if` nodes, on the CPU backend, and the same
//! checks on a GPU (`#[ignore = "needs a CUDA GPU"]`, run with `--include-ignored`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpu_pipeline::{
    CaptureMode, Comparison, Condition, ConditionValue, Context, CpuKernel, DeviceBuffer, Error,
    Event, FlagCell, Graph, GraphNodeType, LaunchConfig, LoopState, ManagedBuffer, Module,
    PinnedBuffer, Stream, TypedKernel, WaitCondition,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

type AddScalar = (u32, f32, &'static mut [f32]);
type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);

fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
    data[..n as usize].iter_mut().for_each(|x| *x += value);
}

fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y[..n as usize].iter_mut().zip(x) {
        *y = a.mul_add(*x, *y);
    }
}

struct Kernels {
    add: TypedKernel<AddScalar>,
    saxpy: TypedKernel<Saxpy>,
}

fn kernels(ctx: &Context) -> Kernels {
    let module = Module::load_ptx(ctx, PTX).unwrap().named("test_kernels");
    // SAFETY: add_scalar(unsigned n, float value, float* data) and saxpy(unsigned n, float a,
    // const float* x, float* y), as test_kernels.cu declares them.
    let (add, saxpy_kernel) = unsafe {
        (
            module
                .function("add_scalar")
                .unwrap()
                .typed::<AddScalar>()
                .unwrap(),
            module.function("saxpy").unwrap().typed::<Saxpy>().unwrap(),
        )
    };
    Kernels {
        add: add.with_cpu(CpuKernel::new(add_scalar)),
        saxpy: saxpy_kernel.with_cpu(CpuKernel::new(saxpy)),
    }
}

fn one() -> LaunchConfig {
    LaunchConfig::new(1u32, 32u32)
}

// ---- Shared bodies, run on each backend. ----

/// A diamond (a -> b, a -> c, b -> d, c -> d) has exactly its 4 edges, and runs in order.
fn diamond_has_exactly_its_edges(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let input = PinnedBuffer::from_slice(ctx, &[1.0f32; 8]).unwrap();
    let mut x = DeviceBuffer::<f32>::alloc(ctx, 8).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&stream, 8).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, 8).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let a = graph.add_copy_htod_node(&[], &input, &mut x).unwrap();
    let b = graph
        .add_kernel_node(&[a], &k.add, one(), (8u32, 1.0f32, &mut y))
        .unwrap();
    let c = graph.add_empty_node(&[a]).unwrap();
    let d = graph
        .add_kernel_node(&[b.node(), c], &k.saxpy, one(), (8u32, 2.0f32, &x, &mut y))
        .unwrap();
    let e = graph.add_copy_dtoh_node(&[d.node()], &y, &mut out).unwrap();
    assert_eq!(e.kind(), GraphNodeType::MEMCPY);
    assert_eq!(graph.node_count().unwrap(), 5);
    assert_eq!(
        graph.edge_count().unwrap(),
        5,
        "a->b, a->c, b->d, c->d, d->e"
    );
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    // Each launch: y += 1, then y += 2 * x.
    assert_eq!(out.to_vec().unwrap(), vec![6.0; 8]);
}

/// Memsets, host nodes and child graphs run at every launch.
fn memsets_hosts_and_children_run_every_launch(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut data = DeviceBuffer::<f32>::alloc(ctx, 4).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, 4).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut child = Graph::new(ctx).unwrap();
    child
        .add_kernel_node(&[], &k.add, one(), (4u32, 0.5f32, &mut data))
        .unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let set = graph
        .add_memset_u32_node(&[], &mut data, 2.0f32.to_bits())
        .unwrap();
    let inner = graph.add_child_graph_node(&[set], &child).unwrap();
    assert_eq!(inner.kind(), GraphNodeType::GRAPH);
    let copy = graph.add_copy_dtoh_node(&[inner], &data, &mut out).unwrap();
    let counter = runs.clone();
    graph
        .add_host_node(&[copy], move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    drop(child);
    let exec = graph.instantiate().unwrap();
    for _ in 0..3 {
        exec.launch(&stream).unwrap();
    }
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![2.5; 4]);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

/// Work captured from a stream lands after the given nodes; what it ends with is returned.
fn captured_work_joins_the_built_graph(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, 4).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let first = graph
        .add_kernel_node(&[], &k.add, one(), (4u32, 1.0f32, &mut data))
        .unwrap();
    let tail = graph
        .capture_into(&[first.node()], &stream, |s| {
            k.add.launch(s, one(), (4u32, 10.0f32, &mut data))?;
            k.add.launch(s, one(), (4u32, 100.0f32, &mut data))
        })
        .unwrap();
    assert_eq!(tail.len(), 1);
    graph.add_copy_dtoh_node(&tail, &data, &mut out).unwrap();
    assert_eq!(graph.node_count().unwrap(), 4);
    assert_eq!(graph.edge_count().unwrap(), 3, "a chain of four nodes");
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![111.0; 4]);
    // Nothing captured: the dependencies come back.
    let again = graph.capture_into(&tail, &stream, |_| Ok(())).unwrap();
    assert_eq!(again, tail);
}

/// An event recorded by a graph node orders another stream's later work.
fn event_nodes_order_work_outside_the_graph(ctx: &Context) {
    let (stream, other) = (Stream::new(ctx).unwrap(), Stream::new(ctx).unwrap());
    let k = kernels(ctx);
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, 4).unwrap();
    stream.synchronize().unwrap();
    let done = Arc::new(Event::new(ctx).unwrap());
    let mut graph = Graph::new(ctx).unwrap();
    let add = graph
        .add_kernel_node(&[], &k.add, one(), (4u32, 3.0f32, &mut data))
        .unwrap();
    let record = graph.add_event_record_node(&[add.node()], &done).unwrap();
    assert_eq!(record.kind(), GraphNodeType::EVENT_RECORD);
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    other.wait_event(&done).unwrap();
    other.copy_dtoh(&data, &mut out).unwrap();
    other.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![3.0; 4]);
    // A wait node on an event already reached does not block.
    let mut waiting = Graph::new(ctx).unwrap();
    let wait = waiting.add_event_wait_node(&[], &done).unwrap();
    assert_eq!(wait.kind(), GraphNodeType::WAIT_EVENT);
    waiting.instantiate().unwrap().launch(&stream).unwrap();
    stream.synchronize().unwrap();
}

/// As on CUDA, a launch records its record nodes' events and picks its wait nodes' records
/// when it is enqueued: a wait enqueued right after the launch (before the replay ran)
/// waits for the graph's record, and a wait node orders the graph's work after a record
/// made before the launch. On the checked CPU backend neither is a race.
fn event_nodes_act_when_the_launch_is_enqueued(ctx: &Context) {
    let (stream, other) = (Stream::new(ctx).unwrap(), Stream::new(ctx).unwrap());
    let k = kernels(ctx);
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, 4).unwrap();
    stream.synchronize().unwrap();
    let done = Arc::new(Event::new(ctx).unwrap());
    let mut graph = Graph::new(ctx).unwrap();
    // A slow first node, so the wait below is enqueued long before the record runs.
    let slow = graph
        .add_host_node(&[], || std::thread::sleep(Duration::from_millis(100)))
        .unwrap();
    let add = graph
        .add_kernel_node(&[slow], &k.add, one(), (4u32, 3.0f32, &mut data))
        .unwrap();
    graph.add_event_record_node(&[add.node()], &done).unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    other.wait_event(&done).unwrap();
    other.copy_dtoh(&data, &mut out).unwrap();
    other.synchronize().unwrap();
    assert_eq!(
        out.to_vec().unwrap(),
        [3.0; 4],
        "the copy waited for the graph"
    );
    stream.synchronize().unwrap();
    // A wait node on a record made on another stream before the launch.
    let ready = Arc::new(Event::new(ctx).unwrap());
    other.memset_u32(&mut data, 1.0f32.to_bits()).unwrap();
    other.record_into(&ready).unwrap();
    let mut waiting = Graph::new(ctx).unwrap();
    let wait = waiting.add_event_wait_node(&[], &ready).unwrap();
    waiting
        .add_kernel_node(&[wait], &k.add, one(), (4u32, 3.0f32, &mut data))
        .unwrap();
    waiting.instantiate().unwrap().launch(&stream).unwrap();
    stream.synchronize().unwrap();
    other.synchronize().unwrap();
    assert_eq!(
        data.to_vec(&stream).unwrap(),
        [4.0; 4],
        "the kernel ran after the memset"
    );
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
}

/// `while residual > 0.5` with `residual -= 1` per iteration: 5 iterations from 5.0, the
/// same again at the next launch once the residual is reset, none from 0.0.
fn while_loops_count_and_exit_early(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut residual = DeviceBuffer::<f32>::alloc(ctx, 1).unwrap();
    let mut steps = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, 1).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    // residual = 5.0 at the start of every launch.
    let init = graph
        .add_memset_u32_node(&[], &mut residual, 5.0f32.to_bits())
        .unwrap();
    let cond = Condition::compare(&residual, Comparison::Greater, 0.5f32).named("residual > 0.5");
    let looping = graph
        .add_while_node(&[init], cond, 100, |body| {
            let down = body.add_kernel_node(
                &[],
                &k.add,
                LaunchConfig::new(1u32, 1u32),
                (1u32, -1.0f32, &mut residual),
            )?;
            body.add_kernel_node(
                &[down.node()],
                &k.add,
                LaunchConfig::new(1u32, 1u32),
                (1u32, 1.0f32, &mut steps),
            )?;
            Ok(())
        })
        .unwrap();
    assert_eq!(looping.node().kind(), GraphNodeType::CONDITIONAL);
    assert!(graph.has_conditional_nodes());
    assert_eq!(graph.loops().len(), 1);
    graph
        .add_copy_dtoh_node(&[looping.node()], &steps, &mut out)
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(looping.state().iterations(), 5);
    assert!(!looping.state().hit_limit());
    exec.check_loops().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![5.0]);
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(looping.state().iterations(), 5);
    assert_eq!(out.to_vec().unwrap(), vec![10.0]);
    drop(exec);

    // Early exit: a loop whose condition is false at the start runs no iteration.
    let zero = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut never = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let cond = Condition::compare(&zero, Comparison::Greater, 0.5f32);
    let looping = graph
        .add_while_node(&[], cond, 100, |body| {
            body.add_kernel_node(&[], &k.add, one(), (1u32, 1.0f32, &mut never))?;
            Ok(())
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(looping.state().iterations(), 0);
    exec.check_loops().unwrap();
    assert_eq!(never.to_vec(&stream).unwrap(), vec![0.0]);
}

/// A loop whose condition never fails stops at its maximum and reports it, once.
fn a_loop_that_never_converges_is_a_named_error(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut residual = DeviceBuffer::from_slice(&stream, &[1.0f32]).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let cond = Condition::compare(&residual, Comparison::Greater, 0.5f32).named("residual > tol");
    let looping = graph
        .add_while_node(&[], cond, 10, |body| {
            // Diverges: the residual grows.
            body.add_kernel_node(&[], &k.add, one(), (1u32, 1.0f32, &mut residual))?;
            Ok(())
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(looping.state().iterations(), 10);
    assert!(looping.state().hit_limit());
    match exec.check_loops() {
        Err(Error::IterationLimit {
            label,
            max_iterations: 10,
        }) => assert_eq!(label, "residual > tol"),
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    // The mark is cleared by the check.
    exec.check_loops().unwrap();
    assert_eq!(residual.to_vec(&stream).unwrap(), vec![11.0]);
}

/// `if counter % 3 == 0` over the replay number: the body runs on replays 0 and 3 of 6.
fn if_runs_on_every_third_replay(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut field = DeviceBuffer::from_slice(&stream, &[1.0f32; 4]).unwrap();
    let mut snapshots = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
    let mut taken = PinnedBuffer::<f32>::zeros(ctx, 4).unwrap();
    stream.synchronize().unwrap();
    let replay = FlagCell::<u32>::new(ctx, 0).unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let step = graph
        .add_kernel_node(&[], &k.add, one(), (4u32, 1.0f32, &mut field))
        .unwrap();
    graph
        .add_if_node(&[step.node()], Condition::every(&replay, 3, 0), |body| {
            let count = body.add_kernel_node(&[], &k.add, one(), (4u32, 1.0f32, &mut snapshots))?;
            // A copy to pinned memory inside a conditional body.
            body.add_copy_dtoh_node(&[count.node()], &field, &mut taken)?;
            Ok(())
        })
        .unwrap();
    assert!(graph.loops().is_empty(), "an `if` has no loop state");
    let exec = graph.instantiate().unwrap();
    for n in 0..6u32 {
        stream.write_value_32(&replay, n).unwrap();
        exec.launch(&stream).unwrap();
    }
    stream.synchronize().unwrap();
    assert_eq!(snapshots.to_vec(&stream).unwrap(), vec![2.0; 4]);
    // The last snapshot was taken at replay 3, after its step: field was 1 + 4.
    assert_eq!(taken.to_vec().unwrap(), vec![5.0; 4]);
    assert_eq!(field.to_vec(&stream).unwrap(), vec![7.0; 4]);
}

/// An inner loop inside an outer loop restarts at each outer iteration; a `u32` flag ends a
/// loop that a memset in its body clears.
fn nested_loops_and_flags(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut outer = DeviceBuffer::from_slice(&stream, &[3.0f32]).unwrap();
    let mut inner = DeviceBuffer::<f32>::alloc(ctx, 1).unwrap();
    let mut total = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut flag = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let cond = Condition::compare(&outer, Comparison::Greater, 0.5f32);
    let outer_loop = graph
        .add_while_node(&[], cond, 10, |body| {
            let reset = body.add_memset_u32_node(&[], &mut inner, 2.0f32.to_bits())?;
            let cond = Condition::compare(&inner, Comparison::GreaterOrEqual, 1.0f32);
            let inner_loop = body.add_while_node(&[reset], cond, 10, |body| {
                let a = body.add_kernel_node(&[], &k.add, one(), (1u32, -1.0f32, &mut inner))?;
                body.add_kernel_node(&[a.node()], &k.add, one(), (1u32, 1.0f32, &mut total))?;
                Ok(())
            })?;
            body.add_kernel_node(
                &[inner_loop.node()],
                &k.add,
                one(),
                (1u32, -1.0f32, &mut outer),
            )?;
            Ok(())
        })
        .unwrap();
    let flagged = graph
        .add_while_node(
            &[outer_loop.node()],
            Condition::compare(&flag, Comparison::NotEqual, 0u32),
            10,
            |body| {
                body.add_memset_u32_node(&[], &mut flag, 0)?;
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(graph.loops().len(), 3);
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    exec.check_loops().unwrap();
    assert_eq!(outer_loop.state().iterations(), 3);
    assert_eq!(flagged.state().iterations(), 1);
    assert_eq!(
        total.to_vec(&stream).unwrap(),
        vec![6.0],
        "2 inner per outer"
    );
}

/// The CUDA rules for graphs with conditional nodes hold on every backend.
fn conditional_graphs_keep_the_cuda_rules(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut value = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let cond = Condition::compare(&value, Comparison::Less, 0.0f32);
    graph.add_if_node(&[], cond, |_| Ok(())).unwrap();
    let exec = graph.instantiate().unwrap();
    assert!(matches!(
        graph.instantiate(),
        Err(Error::InvalidArgument { .. })
    ));
    drop(exec);
    graph.instantiate().unwrap();
    assert!(graph.try_clone().is_err());
    let mut parent = Graph::new(ctx).unwrap();
    assert!(parent.add_child_graph_node(&[], &graph).is_err());

    // A body that fails leaves the graph refusing to be instantiated.
    let mut broken = Graph::new(ctx).unwrap();
    let cond = Condition::compare(&value, Comparison::Less, 0.0f32);
    let err = broken
        .add_while_node(&[], cond, 5, |body| {
            body.add_kernel_node(&[], &k.add, one(), (1u32, 1.0f32, &mut value))?;
            Err(Error::IterationLimit {
                label: "made up".into(),
                max_iterations: 1,
            })
        })
        .unwrap_err();
    assert!(matches!(err, Error::IterationLimit { .. }));
    assert!(broken.instantiate().is_err());
    assert!(broken.add_empty_node(&[]).is_err());

    // A body node cannot depend on a node outside the body, nor the other way round.
    let mut graph = Graph::new(ctx).unwrap();
    let outside = graph.add_empty_node(&[]).unwrap();
    let cond = Condition::compare(&value, Comparison::Less, 0.0f32);
    let err = graph
        .add_if_node(&[outside], cond, |body| {
            body.add_empty_node(&[outside])?;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    // A zero maximum and a zero modulus are refused.
    let mut graph = Graph::new(ctx).unwrap();
    let cond = Condition::compare(&value, Comparison::Less, 0.0f32);
    assert!(graph.add_while_node(&[], cond, 0, |_| Ok(())).is_err());
    let counter = FlagCell::<u32>::new(ctx, 0).unwrap();
    assert!(
        graph
            .add_if_node(&[], Condition::every(&counter, 0, 0), |_| Ok(()))
            .is_err()
    );
}

/// A clone has the same nodes and edges and runs on its own.
fn clones_run_on_their_own(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 2).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let a = graph
        .add_kernel_node(&[], &k.add, one(), (2u32, 1.0f32, &mut data))
        .unwrap();
    graph
        .add_kernel_node(&[a.node()], &k.add, one(), (2u32, 2.0f32, &mut data))
        .unwrap();
    let copy = graph.try_clone().unwrap();
    drop(graph);
    assert_eq!(copy.node_count().unwrap(), 2);
    assert_eq!(copy.edge_count().unwrap(), 1);
    copy.instantiate().unwrap().launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(data.to_vec(&stream).unwrap(), vec![3.0; 2]);
}

/// Every comparison.
const COMPARISONS: [Comparison; 6] = [
    Comparison::Greater,
    Comparison::GreaterOrEqual,
    Comparison::Less,
    Comparison::LessOrEqual,
    Comparison::Equal,
    Comparison::NotEqual,
];

/// `values` against `threshold` with every comparison, each value in an `if`/`else`, a `while`
/// and a `do ... while` whose bodies leave it alone (on CUDA, each comparison and type has its
/// own condition kernel): the branch taken, and each loop's count and mark, are what the
/// comparison gives on the host (a loop that holds runs into its maximum of 3; a do-while that
/// does not runs once).
fn decide_each_value<T: ConditionValue + PartialOrd + std::fmt::Debug>(
    ctx: &Context,
    stream: &Stream,
    values: &[T],
    threshold: T,
) {
    for comparison in COMPARISONS {
        let inputs: Vec<DeviceBuffer<T>> = values
            .iter()
            .map(|v| DeviceBuffer::from_slice(stream, &[*v]).unwrap())
            .collect();
        let conditions = inputs
            .iter()
            .map(|input| Condition::compare(input, comparison, threshold))
            .collect();
        let holds = values
            .iter()
            .map(|v| comparison.holds(*v, threshold))
            .collect();
        let what = format!("{comparison:?} {threshold:?} on {values:?}");
        decide_and_loop(ctx, stream, conditions, holds, &what);
    }
}

/// Each condition in an `if`/`else`, a `while` and a `do ... while` (maximum 3) of one graph,
/// launched once: `holds[i]` is whether condition `i` holds.
fn decide_and_loop(
    ctx: &Context,
    stream: &Stream,
    conditions: Vec<Condition>,
    holds: Vec<bool>,
    what: &str,
) {
    let k = kernels(ctx);
    let single = LaunchConfig::new(1u32, 1u32);
    let n = conditions.len();
    let mut then = DeviceBuffer::<f32>::zeros(stream, n).unwrap();
    let mut other = DeviceBuffer::<f32>::zeros(stream, n).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let mut loops: Vec<(LoopState, LoopState)> = Vec::new();
    for (i, condition) in conditions.into_iter().enumerate() {
        graph
            .add_if_else_node(
                &[],
                condition.clone(),
                |b| {
                    let mut at = then.slice_mut(i..i + 1)?;
                    b.add_kernel_node(&[], &k.add, single, (1u32, 1.0f32, &mut at))
                        .map(drop)
                },
                |b| {
                    let mut at = other.slice_mut(i..i + 1)?;
                    b.add_kernel_node(&[], &k.add, single, (1u32, 1.0f32, &mut at))
                        .map(drop)
                },
            )
            .unwrap();
        let looping = graph
            .add_while_node(&[], condition.clone(), 3, |_| Ok(()))
            .unwrap();
        let once = graph
            .add_do_while_node(&[], condition, 3, |_| Ok(()))
            .unwrap();
        loops.push((looping.state().clone(), once.state().clone()));
    }
    let exec = graph.instantiate().unwrap();
    exec.launch(stream).unwrap();
    stream.synchronize().unwrap();
    let then = then.to_vec(stream).unwrap();
    let other = other.to_vec(stream).unwrap();
    for (i, holds) in holds.into_iter().enumerate() {
        let at = format!("{what}, value {i}");
        let taken = (f32::from(u8::from(holds)), f32::from(u8::from(!holds)));
        assert_eq!((then[i], other[i]), taken, "{at}");
        let (looping, once) = &loops[i];
        let expected = if holds { (3, true) } else { (0, false) };
        assert_eq!(
            (looping.iterations(), looping.hit_limit()),
            expected,
            "while, {at}"
        );
        let expected = if holds { (3, true) } else { (1, false) };
        assert_eq!(
            (once.iterations(), once.hit_limit()),
            expected,
            "do-while, {at}"
        );
    }
}

/// Every comparison of every value type, a `u32` value itself and a counter's `every` test,
/// each deciding an `if`/`else`, a `while` and a `do ... while`: NaN compares as IEEE says,
/// and a `u32` compares without sign.
fn every_comparison_decides_ifs_and_loops(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    decide_each_value(ctx, &stream, &[0.5f32, 1.0, 2.0, f32::NAN], 1.0);
    decide_each_value(ctx, &stream, &[0.5f64, 1.0, 2.0, f64::NAN], 1.0);
    decide_each_value(ctx, &stream, &[0u32, 7, 8, 4_000_000_000], 7);
    let values = [0u32, 1, 5];
    let inputs: Vec<DeviceBuffer<u32>> = values
        .iter()
        .map(|v| DeviceBuffer::from_slice(&stream, &[*v]).unwrap())
        .collect();
    let conditions = inputs.iter().map(Condition::value).collect();
    let holds = values.iter().map(|v| *v != 0).collect();
    decide_and_loop(ctx, &stream, conditions, holds, "value");
    let counter = FlagCell::<u32>::new(ctx, 5).unwrap();
    let conditions = vec![
        Condition::every(&counter, 2, 1),
        Condition::every(&counter, 3, 1),
        Condition::every(&counter, 1, 0),
    ];
    decide_and_loop(ctx, &stream, conditions, vec![true, false, true], "every");
}

/// What a loop that lowers `start` by one per iteration while it is above 0.5 counts, with
/// the test before the first iteration or not, and whether it stops at `max`.
fn counted(start: f32, first_test: bool, max: u32) -> (u32, bool) {
    let mut value = start;
    if first_test && value <= 0.5 {
        return (0, false);
    }
    let mut done = 0;
    loop {
        value -= 1.0;
        done += 1;
        if value <= 0.5 {
            return (done, false);
        }
        if done >= max {
            return (done, true);
        }
    }
}

/// A `while` and a `do ... while` launched again and again from new starts: after every
/// launch each state holds that launch's count (also when it repeats the last one, or is 0)
/// and its mark when it stopped at its maximum, which the check clears.
fn loop_states_follow_every_launch(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let mut a = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut b = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let single = LaunchConfig::new(1u32, 1u32);
    let cond = Condition::compare(&a, Comparison::Greater, 0.5f32).named("a > 0.5");
    let looping = graph
        .add_while_node(&[], cond, 4, |body| {
            body.add_kernel_node(&[], &k.add, single, (1u32, -1.0f32, &mut a))?;
            Ok(())
        })
        .unwrap();
    let cond = Condition::compare(&b, Comparison::Greater, 0.5f32).named("b > 0.5");
    let once = graph
        .add_do_while_node(&[], cond, 4, |body| {
            body.add_kernel_node(&[], &k.add, single, (1u32, -1.0f32, &mut b))?;
            Ok(())
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    for start in [3.0f32, 3.0, 0.0, 0.0, 10.0, 10.0, 2.0, 4.0, 4.0, 0.0] {
        let staged = PinnedBuffer::from_slice(ctx, &[start]).unwrap();
        stream.copy_htod(&staged, &mut a).unwrap();
        stream.copy_htod(&staged, &mut b).unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        for (state, first_test) in [(looping.state(), true), (once.state(), false)] {
            let (iterations, hit) = counted(start, first_test, 4);
            let at = format!("{} from {start}", state.label());
            assert_eq!(state.iterations(), iterations, "{at}");
            assert_eq!(state.check().is_err(), hit, "{at}");
            assert!(!state.hit_limit(), "{at}: the check clears the mark");
        }
    }
}

/// Sixteen `while` and sixteen `do ... while` loops with no edge between them, every other
/// one on a condition that holds, their bodies empty (on CUDA, one node: the condition
/// kernel), and a loop in an `if` body beside them, in twenty new graphs launched twice
/// each: each loop runs to its maximum, or not at all (once for a do-while), every launch.
/// (On CUDA the driver faults when WHILE nodes run concurrently, so instantiation orders
/// them: without that, graphs like these lost the context within a few new graphs on an
/// H100.)
fn parallel_loops_each_count_their_iterations(ctx: &Context) {
    const LOOPS: usize = 16;
    const GRAPHS: u32 = 20;
    const LAUNCHES: u32 = 2;
    let stream = Stream::new(ctx).unwrap();
    let k = kernels(ctx);
    let single = LaunchConfig::new(1u32, 1u32);
    let holds = DeviceBuffer::from_slice(&stream, &[2.0f32]).unwrap();
    let fails = DeviceBuffer::from_slice(&stream, &[0.5f32]).unwrap();
    let mut count = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let on = |holding: bool| {
        let value = if holding { &holds } else { &fails };
        Condition::compare(value, Comparison::Greater, 1.0f32)
    };
    // Iterations per launch of loop `i`: 3 where the condition holds, else 0 (1 for a
    // do-while).
    let expected = |i: usize| match (i % 2 == 1, i < LOOPS) {
        (true, _) => 3,
        (false, true) => 0,
        (false, false) => 1,
    };
    for graph_index in 0..GRAPHS {
        let mut graph = Graph::new(ctx).unwrap();
        let mut states = Vec::new();
        for i in 0..2 * LOOPS {
            let state = if i < LOOPS {
                graph.add_while_node(&[], on(i % 2 == 1), 3, |_| Ok(()))
            } else {
                graph.add_do_while_node(&[], on(i % 2 == 1), 3, |_| Ok(()))
            };
            states.push(state.unwrap().state().clone());
        }
        let mut inner = None;
        graph
            .add_if_node(&[], on(true), |b| {
                let looping = b.add_while_node(&[], on(true), 3, |body| {
                    body.add_kernel_node(&[], &k.add, single, (1u32, 1.0f32, &mut count))
                        .map(drop)
                })?;
                inner = Some(looping.state().clone());
                Ok(())
            })
            .unwrap();
        let exec = graph.instantiate().unwrap();
        for launch in 1..=LAUNCHES {
            exec.launch(&stream).unwrap();
            stream.synchronize().unwrap();
            for (i, state) in states.iter().enumerate() {
                assert_eq!(
                    (state.iterations(), state.hit_limit()),
                    (expected(i), expected(i) == 3),
                    "graph {graph_index}, loop {i}, launch {launch}"
                );
            }
            let inner = inner.as_ref().expect("the if body was built");
            assert_eq!((inner.iterations(), inner.hit_limit()), (3, true));
        }
    }
    let count = count.to_vec(&stream).unwrap()[0];
    assert_eq!(count, (3 * LAUNCHES * GRAPHS) as f32);
}

/// Thirty-two graphs of one loop each (a one-node body), launched at once on thirty-two
/// streams, in ten rounds of new graphs launched twice each: every loop runs to its maximum
/// every launch. (On CUDA the driver faults when WHILE nodes of separate graphs run at once
/// too, so graphs with loops of one context launch one after another: without that, graphs
/// like these lost the context on an H100.)
fn loops_of_separate_graphs_on_separate_streams(ctx: &Context) {
    const GRAPHS: usize = 32;
    const ROUNDS: usize = 10;
    const LAUNCHES: u32 = 2;
    let setup = Stream::new(ctx).unwrap();
    let holds = DeviceBuffer::from_slice(&setup, &[2.0f32]).unwrap();
    setup.synchronize().unwrap();
    let streams: Vec<Stream> = (0..GRAPHS).map(|_| Stream::new(ctx).unwrap()).collect();
    for round in 0..ROUNDS {
        let mut execs = Vec::new();
        let mut states = Vec::new();
        for _ in 0..GRAPHS {
            let mut graph = Graph::new(ctx).unwrap();
            let condition = Condition::compare(&holds, Comparison::Greater, 1.0f32);
            let looping = graph.add_while_node(&[], condition, 3, |_| Ok(())).unwrap();
            states.push(looping.state().clone());
            execs.push(graph.instantiate().unwrap());
        }
        for launch in 1..=LAUNCHES {
            for (exec, stream) in execs.iter().zip(&streams) {
                exec.launch(stream).unwrap();
            }
            for stream in &streams {
                stream.synchronize().unwrap();
            }
            for (i, state) in states.iter().enumerate() {
                assert_eq!(
                    (state.iterations(), state.hit_limit()),
                    (3, true),
                    "round {round}, graph {i}, launch {launch}"
                );
            }
        }
    }
    // Each launched on a stream closed right after: the next still waits for it.
    let mut kept = Vec::new();
    for _ in 0..GRAPHS {
        let mut graph = Graph::new(ctx).unwrap();
        let condition = Condition::compare(&holds, Comparison::Greater, 1.0f32);
        let looping = graph.add_while_node(&[], condition, 3, |_| Ok(())).unwrap();
        let exec = graph.instantiate().unwrap();
        let stream = Stream::new(ctx).unwrap();
        exec.launch(&stream).unwrap();
        drop(stream);
        kept.push((exec, looping.state().clone()));
    }
    ctx.synchronize().unwrap();
    for (i, (_, state)) in kept.iter().enumerate() {
        assert_eq!(
            (state.iterations(), state.hit_limit()),
            (3, true),
            "graph {i} of closed streams"
        );
    }
}

/// A graph that was never launched is dropped at once, even while a stream of its context
/// waits for the host (a launched one waits for its work, as CUDA's does).
fn an_exec_never_launched_drops_without_waiting(ctx: &Context) {
    let (stream, waiting) = (Stream::new(ctx).unwrap(), Stream::new(ctx).unwrap());
    let go = FlagCell::<u32>::new(ctx, 0).unwrap();
    waiting.wait_value_32(&go, WaitCondition::Equal, 1).unwrap();
    let mut data = DeviceBuffer::<u32>::zeros(&stream, 4).unwrap();
    stream.synchronize().unwrap();
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |s| s.memset_u32(&mut data, 1))
        .unwrap();
    let exec = graph.instantiate().unwrap();
    let dropped = AtomicBool::new(false);
    let took = std::thread::scope(|scope| {
        // Sets the flag if the drop blocks, so that a failure ends instead of hanging.
        scope.spawn(|| {
            let started = Instant::now();
            while !dropped.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(3) {
                std::thread::sleep(Duration::from_millis(5));
            }
            go.store(1);
        });
        let started = Instant::now();
        drop(exec);
        dropped.store(true, Ordering::Release);
        started.elapsed()
    });
    waiting.synchronize().unwrap();
    assert!(
        took < Duration::from_secs(2),
        "the drop waited {took:?} for a stream the graph never used"
    );
}

/// A batch of updates passed to `mem::forget` still leaves the graph gated on the memory it
/// gave a node: a launch is refused while a host view of that memory is alive.
fn a_forgotten_update_batch_still_gates_launches(ctx: &Context) {
    let k = kernels(ctx);
    let stream = Stream::new(ctx).unwrap();
    let mut device = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
    let mut managed = ManagedBuffer::<f32>::zeros(ctx, 4).unwrap();
    stream.synchronize().unwrap();
    let mut graph = Graph::new(ctx).unwrap();
    let node = graph
        .add_kernel_node(&[], &k.add, one(), (4u32, 1.0f32, &mut device))
        .unwrap();
    let mut exec = graph.instantiate().unwrap();
    let mut batch = exec.kernel_updates().unwrap();
    batch
        .set(&node, &k.add, one(), (4u32, 1.0f32, &mut managed))
        .unwrap();
    // The batch has no `Drop` now (nothing waits for its end); the forget keeps it so.
    #[allow(clippy::forget_non_drop)]
    std::mem::forget(batch);
    let view = managed.as_slice().unwrap();
    let refused = exec.launch(&stream);
    drop(view);
    assert!(
        refused.is_err(),
        "a launch writing managed memory while a host view of it is alive"
    );
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(managed.as_slice().unwrap().to_vec(), [1.0; 4]);
}

tests::on_both_backends!(
    diamond_has_exactly_its_edges,
    an_exec_never_launched_drops_without_waiting,
    event_nodes_act_when_the_launch_is_enqueued,
    a_forgotten_update_batch_still_gates_launches,
    parallel_loops_each_count_their_iterations,
    loops_of_separate_graphs_on_separate_streams,
    memsets_hosts_and_children_run_every_launch,
    captured_work_joins_the_built_graph,
    event_nodes_order_work_outside_the_graph,
    while_loops_count_and_exit_early,
    a_loop_that_never_converges_is_a_named_error,
    if_runs_on_every_third_replay,
    nested_loops_and_flags,
    conditional_graphs_keep_the_cuda_rules,
    clones_run_on_their_own,
    every_comparison_decides_ifs_and_loops,
    loop_states_follow_every_launch,
);

#[test]
fn on_the_cpu_backend_edges_go_forward() {
    let ctx = Context::cpu();
    let mut graph = Graph::new(&ctx).unwrap();
    let a = graph.add_empty_node(&[]).unwrap();
    let b = graph.add_empty_node(&[]).unwrap();
    graph.add_dependency(&a, &b).unwrap();
    assert_eq!(graph.edge_count().unwrap(), 1);
    assert!(graph.add_dependency(&b, &a).is_err());
    let mut other = Graph::new(&ctx).unwrap();
    assert!(
        other.add_empty_node(&[a]).is_err(),
        "a node of another graph"
    );
}

/// A record node that a failed child graph never reaches still completes its launch's record
/// when the replay ends, so a wait on the event does not hang (CPU backend: a host node that
/// panics).
#[test]
fn a_record_a_failed_child_graph_skips_does_not_hang_its_waiters() {
    let ctx = Context::cpu();
    let (stream, other) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let done = Arc::new(Event::new(&ctx).unwrap());
    let mut child = Graph::new(&ctx).unwrap();
    let fails = child
        .add_host_node(&[], || panic!("the host node fails"))
        .unwrap();
    child.add_event_record_node(&[fails], &done).unwrap();
    let mut graph = Graph::new(&ctx).unwrap();
    graph.add_child_graph_node(&[], &child).unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    other.wait_event(&done).unwrap();
    assert!(stream.synchronize().is_err(), "the host node failed");
    let started = Instant::now();
    other.synchronize().unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
}
