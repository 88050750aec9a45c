//! Graphs: capture (one stream, and forked over two), instantiate, replay, in-place kernel
//! parameter updates, whole-graph updates, hand-built graphs (CUDA-only), DOT.
//!
//! Each shared scenario runs on the host backend in checked mode (in CI, with the kernels'
//! host implementations below) and on CUDA device 0 (ignored without a GPU).
//!
//! Captures use `CaptureMode::ThreadLocal` and the tests of this binary take one lock, so a
//! capture never meets another test's allocation or synchronize.

use std::sync::{Mutex, MutexGuard};

use gpu_pipeline::sys::CUresult;
use gpu_pipeline::{
    Backend, CaptureMode, Condition, Context, DeviceBuffer, Error, Graph, GraphNodeType,
    GraphUpdateResult, HostKernel, LaunchConfig, Module, PinnedBuffer, Stream, TypedKernel,
};

#[path = "../../benches/raw_driver.rs"]
#[allow(dead_code)]
mod raw_driver;

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

type AddScalar = (u32, f32, &'static mut [f32]);
type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);

static GPU: Mutex<()> = Mutex::new(());

struct Fixture {
    _lock: MutexGuard<'static, ()>,
    ctx: Context,
    stream: Stream,
    add_scalar: TypedKernel<AddScalar>,
    saxpy: TypedKernel<Saxpy>,
    empty: TypedKernel<()>,
}

/// The host implementations of `test_kernels.cu`: what one whole launch computes.
mod host_impl {
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        let n = n as usize;
        for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
            *y = a.mul_add(*x, *y);
        }
    }

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }

    pub fn empty() {}
}

fn fixture() -> Fixture {
    fixture_on(&Context::cuda(0).expect("a CUDA device"))
}

fn fixture_on(ctx: &Context) -> Fixture {
    let lock = GPU.lock().unwrap_or_else(|p| p.into_inner());
    let ctx = ctx.clone();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let module = Module::load_ptx(&ctx, PTX).unwrap().named("test_kernels");
    type Kernels = (TypedKernel<AddScalar>, TypedKernel<Saxpy>, TypedKernel<()>);
    // SAFETY: the signatures of test_kernels.cu: add_scalar(unsigned, float, float*),
    // saxpy(unsigned, float, const float*, float*), empty().
    let (add_scalar, saxpy, empty): Kernels = unsafe {
        (
            module.function("add_scalar").unwrap().typed().unwrap(),
            module.function("saxpy").unwrap().typed().unwrap(),
            module.function("empty").unwrap().typed().unwrap(),
        )
    };
    Fixture {
        _lock: lock,
        ctx,
        stream,
        add_scalar: add_scalar.with_host(HostKernel::new(host_impl::add_scalar)),
        saxpy: saxpy.with_host(HostKernel::new(host_impl::saxpy)),
        empty: empty.with_host(HostKernel::new(host_impl::empty)),
    }
}

/// Runs each scenario `fn name(ctx: &Context)` on both backends: the host in checked mode
/// (asserting the race detector found nothing) and CUDA.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod host {
            $(
                #[test]
                fn $name() {
                    let ctx = gpu_pipeline::Context::host_checked();
                    super::$name(&ctx);
                    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
                }
            )*
        }
        mod cuda {
            $(
                #[test]
                #[ignore = "needs a CUDA GPU"]
                fn $name() {
                    super::$name(&gpu_pipeline::Context::cuda(0).unwrap());
                }
            )*
        }
    };
}

on_both_backends!(
    a_chain_of_100_kernels_is_captured_and_replayed_1000_times,
    captured_graphs_keep_their_buffers_and_module_alive,
    a_capture_forked_over_two_streams_and_joined,
    an_unjoined_fork_fails_end_capture,
    a_kernel_parameter_is_updated_in_place_between_replays,
    a_whole_graph_update_swaps_parameters_or_reports_why_not,
    the_dot_text_names_the_kernels,
    graph_launches_fence_the_pinned_memory_they_copy_into,
    replays_on_two_streams_fence_the_pinned_memory_on_each,
    a_replay_fence_holds_through_a_capture_and_a_dropped_stream,
    a_replay_fence_holds_when_its_stream_joins_a_capture,
    a_forgotten_graph_still_fences_its_replays,
    a_launch_is_refused_while_a_host_slice_of_its_memory_is_alive,
    kernel_nodes_come_back_in_launch_order,
    a_clone_gets_the_nodes_its_original_nodes_became,
    a_kernel_node_after_a_stranger_is_refused_and_adds_nothing,
    launches_of_one_executable_graph_on_two_streams_run_one_after_the_other,
);

const N: u32 = 4096;

fn config() -> LaunchConfig {
    LaunchConfig::for_elements(N, 256)
}

fn filled(stream: &Stream, value: f32) -> DeviceBuffer<f32> {
    DeviceBuffer::from_slice(stream, &vec![value; N as usize]).unwrap()
}

fn assert_all(stream: &Stream, buffer: &DeviceBuffer<f32>, expected: f32) {
    let values = buffer.to_vec(stream).unwrap();
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| **v != expected) {
        panic!("element {i} is {v}, expected {expected}");
    }
}

fn a_chain_of_100_kernels_is_captured_and_replayed_1000_times(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            for _ in 0..100 {
                f.add_scalar.launch(s, config(), (N, 1.0f32, &mut data))?;
            }
            Ok(())
        })
        .unwrap();
    // Captured, not run.
    assert_all(&f.stream, &data, 0.0);
    assert_eq!(graph.node_count().unwrap(), 100);
    let kernel_nodes = graph.kernel_nodes().unwrap();
    assert_eq!(kernel_nodes.len(), 100);
    assert!(kernel_nodes.iter().all(|k| k.launches(&f.add_scalar)));
    assert_eq!(kernel_nodes[0].config(), config());

    let exec = graph.instantiate().unwrap();
    exec.upload(&f.stream).unwrap();
    for _ in 0..1000 {
        exec.launch(&f.stream).unwrap();
    }
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &data, 100_000.0);
}

fn captured_graphs_keep_their_buffers_and_module_alive(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut data))?;
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut data))
        })
        .unwrap();
    // The buffer's allocation and the module, each once.
    assert_eq!(graph.retained_count(), 2, "{graph:?}");
    let exec = graph.instantiate().unwrap();
    assert_eq!(exec.retained_count(), 2);
    // The graph and its buffer may go: the executable graph holds what it needs.
    drop(graph);
    drop(data);
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
}

fn a_capture_forked_over_two_streams_and_joined(ctx: &Context) {
    let f = fixture_on(ctx);
    let side = Stream::non_blocking(&f.ctx).unwrap();
    let mut a = filled(&f.stream, 0.0);
    let mut b = filled(&f.stream, 0.0);
    f.stream.synchronize().unwrap();

    f.stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let fork = f.stream.record().unwrap();
    side.wait_event(&fork).unwrap();
    f.add_scalar
        .launch(&f.stream, config(), (N, 1.0f32, &mut a))
        .unwrap();
    f.add_scalar
        .launch(&side, config(), (N, 2.0f32, &mut b))
        .unwrap();
    f.stream.join(&side).unwrap();
    let graph = f.stream.end_capture().unwrap();

    let kernels = graph.kernel_nodes().unwrap();
    assert_eq!(kernels.len(), 2);
    assert!(graph.node_count().unwrap() >= 2);
    let exec = graph.instantiate().unwrap();
    for _ in 0..3 {
        exec.launch(&f.stream).unwrap();
    }
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &a, 3.0);
    assert_all(&f.stream, &b, 6.0);
}

fn an_unjoined_fork_fails_end_capture(ctx: &Context) {
    if ctx.backend() == gpu_pipeline::Backend::Cuda
        && tests::skip_under_compute_sanitizer("ends an unjoined capture on purpose")
    {
        return;
    }

    let f = fixture_on(ctx);
    let side = Stream::non_blocking(&f.ctx).unwrap();
    f.stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let fork = f.stream.record().unwrap();
    side.wait_event(&fork).unwrap();
    f.empty.launch(&side, LaunchConfig::new(1, 1), ()).unwrap();
    // `side` never joins back.
    let err = f.stream.end_capture().unwrap_err();
    match ctx.backend() {
        Backend::Cuda => {
            assert_eq!(
                err.code(),
                Some(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED),
                "{err}"
            );
            assert!(err.to_string().contains("cuStreamEndCapture"), "{err}");
        }
        Backend::Host => {
            assert!(matches!(err, Error::Cpu(_)), "{err:?}");
            assert!(err.to_string().contains("join"), "{err}");
        }
    }
    assert!(!side.is_capturing().unwrap());
}

fn a_kernel_parameter_is_updated_in_place_between_replays(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    let mut other = filled(&f.stream, 0.0);
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut data))
        })
        .unwrap();
    let node = graph.kernel_nodes().unwrap()[0];
    let mut exec = graph.instantiate().unwrap();

    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &data, 1.0);

    // A new scalar.
    exec.set_kernel_params(&node, &f.add_scalar, config(), (N, 5.0f32, &mut data))
        .unwrap();
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &data, 6.0);

    // A new buffer: the executable graph now keeps it alive too.
    let before = exec.retained_count();
    exec.set_kernel_params(&node, &f.add_scalar, config(), (N, 2.0f32, &mut other))
        .unwrap();
    assert_eq!(exec.retained_count(), before + 1);
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &other, 2.0);
    assert_all(&f.stream, &data, 6.0);

    // A node of another kernel is refused.
    let x = filled(&f.stream, 1.0);
    let err = exec
        .set_kernel_params(&node, &f.saxpy, config(), (N, 1.0f32, &x, &mut other))
        .unwrap_err();
    assert!(err.to_string().contains("does not launch `saxpy`"), "{err}");
    // So is a bad configuration.
    let err = exec
        .set_kernel_params(
            &node,
            &f.add_scalar,
            LaunchConfig::new(0, 1),
            (N, 1.0f32, &mut other),
        )
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

fn a_whole_graph_update_swaps_parameters_or_reports_why_not(ctx: &Context) {
    if ctx.backend() == gpu_pipeline::Backend::Cuda
        && tests::skip_under_compute_sanitizer("asks for a graph update the driver refuses")
    {
        return;
    }

    let f = fixture_on(ctx);
    let mut a = filled(&f.stream, 0.0);
    let mut b = filled(&f.stream, 0.0);
    let capture_one = |buffer: &mut DeviceBuffer<f32>, value: f32| -> Graph {
        f.stream
            .capture(CaptureMode::ThreadLocal, |s| {
                f.add_scalar.launch(s, config(), (N, value, buffer))
            })
            .unwrap()
    };
    let first = capture_one(&mut a, 1.0);
    let mut exec = first.instantiate().unwrap();
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &a, 1.0);

    // Same topology, other buffer and scalar.
    let second = capture_one(&mut b, 10.0);
    exec.update(&second).unwrap();
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &b, 10.0);
    assert_all(&f.stream, &a, 1.0);

    // Another topology (two nodes) is refused, with the driver's reason.
    let third = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut a))?;
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut a))
        })
        .unwrap();
    let outcome = exec.try_update(&third).unwrap();
    assert!(!outcome.is_success());
    assert_ne!(outcome.result, GraphUpdateResult::SUCCESS);
    let err = exec.update(&third).unwrap_err();
    if ctx.backend() == Backend::Cuda {
        assert_eq!(
            err.code(),
            Some(CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE),
            "{err}"
        );
    }
    assert!(err.to_string().contains("ERROR"), "{err}");
    if ctx.backend() == Backend::Host {
        // The refused updates changed nothing: the executable graph still runs `second`.
        exec.launch(&f.stream).unwrap();
        f.stream.synchronize().unwrap();
        assert_all(&f.stream, &b, 20.0);
        assert_all(&f.stream, &a, 1.0);
    }
}

fn the_dot_text_names_the_kernels(ctx: &Context) {
    let f = fixture_on(ctx);
    let x = filled(&f.stream, 1.0);
    let mut y = filled(&f.stream, 0.0);
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.saxpy.launch(s, config(), (N, 2.0f32, &x, &mut y))?;
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut y))
        })
        .unwrap();
    let dot = graph.to_dot().unwrap();
    assert!(dot.contains("digraph"), "{dot}");
    assert!(dot.contains("saxpy"), "{dot}");
    assert!(dot.contains("add_scalar"), "{dot}");
    let kinds: Vec<GraphNodeType> = graph.nodes().unwrap().iter().map(|n| n.kind()).collect();
    assert_eq!(kinds, [GraphNodeType::KERNEL, GraphNodeType::KERNEL]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_graph_built_node_by_node_runs_in_dependency_order() {
    let f = fixture();
    let mut data = filled(&f.stream, 1.0);
    f.stream.synchronize().unwrap();
    let mut graph = Graph::new(&f.ctx).unwrap();
    // data = (data + 1) * ... : add 1, then (after a join node) add 2, then a saxpy that
    // doubles it into itself would race, so the last step adds again.
    let first = graph
        .add_kernel_node(&[], &f.add_scalar, config(), (N, 1.0f32, &mut data))
        .unwrap();
    let join = graph.add_empty_node(&[first.node()]).unwrap();
    let second = graph
        .add_kernel_node(&[join], &f.add_scalar, config(), (N, 2.0f32, &mut data))
        .unwrap();
    let third = graph
        .add_kernel_node(&[], &f.add_scalar, config(), (N, 4.0f32, &mut data))
        .unwrap();
    graph.add_dependency(&second.node(), &third.node()).unwrap();
    assert_eq!(graph.node_count().unwrap(), 4);
    assert_eq!(graph.kernel_nodes().unwrap().len(), 3);
    assert_eq!(graph.retained_count(), 2);

    // Nodes of another graph are refused as dependencies.
    let mut other = Graph::new(&f.ctx).unwrap();
    let err = other.add_empty_node(&[join]).unwrap_err();
    assert!(err.to_string().contains("another graph"), "{err}");

    let exec = graph.instantiate().unwrap();
    exec.launch(&f.stream).unwrap();
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &data, 1.0 + 2.0 * 7.0);
}

fn graph_launches_fence_the_pinned_memory_they_copy_into(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    let mut host = PinnedBuffer::<f32>::zeros(&f.ctx, N as usize).unwrap();
    f.stream.synchronize().unwrap();
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut data))?;
            s.copy_dtoh(&data, &mut host)
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    for round in 1..=5 {
        exec.launch(&f.stream).unwrap();
        // No synchronize: reading the pinned buffer waits for the launch on its own.
        let values = host.as_slice().unwrap();
        assert!(
            values.iter().all(|&v| v == round as f32),
            "round {round}: {:?}",
            &values[..4]
        );
    }
}

/// The graph of `graph_launches_fence_the_pinned_memory_they_copy_into`: `data += 1`, then
/// `data` copied into `host`.
fn add_one_and_copy_back(
    f: &Fixture,
    data: &mut DeviceBuffer<f32>,
    host: &mut PinnedBuffer<f32>,
) -> Graph {
    f.stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut *data))?;
            s.copy_dtoh(&*data, &mut *host)
        })
        .unwrap()
}

fn assert_host_all(host: &PinnedBuffer<f32>, expected: f32, what: &str) {
    let values = host.as_slice().unwrap();
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| **v != expected) {
        panic!("{what}: element {i} is {v}, expected {expected}");
    }
}

fn replays_on_two_streams_fence_the_pinned_memory_on_each(ctx: &Context) {
    let f = fixture_on(ctx);
    let other = Stream::non_blocking(&f.ctx).unwrap();
    let mut data = filled(&f.stream, 0.0);
    let mut host = PinnedBuffer::<f32>::zeros(&f.ctx, N as usize).unwrap();
    f.stream.synchronize().unwrap();
    let exec = add_one_and_copy_back(&f, &mut data, &mut host)
        .instantiate()
        .unwrap();
    let mut expected = 0.0;
    for round in 0..20 {
        // Alternate streams; the host reads each replay's value with no synchronize, after
        // the replay's fence on the stream it ran on.
        let stream = if round % 2 == 0 { &f.stream } else { &other };
        exec.launch(stream).unwrap();
        expected += 1.0;
        assert_host_all(&host, expected, &format!("round {round}"));
    }
    // Several replays, then one read: it waits for the last (each stream waits on the other
    // through the host read in between, so the replays never overlap).
    for _ in 0..3 {
        exec.launch(&f.stream).unwrap();
        expected += 1.0;
    }
    assert_host_all(&host, expected, "after three replays");
    // A synchronize of the stream completes the fence: the read after it sees the value too.
    exec.launch(&other).unwrap();
    expected += 1.0;
    other.synchronize().unwrap();
    assert_host_all(&host, expected, "after a synchronize");
}

fn a_replay_fence_holds_through_a_capture_and_a_dropped_stream(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    let mut other_data = filled(&f.stream, 0.0);
    let mut host = PinnedBuffer::<f32>::zeros(&f.ctx, N as usize).unwrap();
    f.stream.synchronize().unwrap();
    let exec = add_one_and_copy_back(&f, &mut data, &mut host)
        .instantiate()
        .unwrap();

    // A replay, then a capture begun on its stream before the host reads: the read during
    // the capture waits for the replay (not for the capture), and sees its value.
    exec.launch(&f.stream).unwrap();
    f.stream.begin_capture(CaptureMode::Relaxed).unwrap();
    f.add_scalar
        .launch(&f.stream, config(), (N, 5.0f32, &mut other_data))
        .unwrap();
    assert_host_all(&host, 1.0, "read during a capture");
    let captured = f.stream.end_capture().unwrap();
    drop(captured);

    // A replay on a stream dropped before the read: the fence outlives the stream.
    let short_lived = Stream::non_blocking(&f.ctx).unwrap();
    exec.launch(&short_lived).unwrap();
    drop(short_lived);
    assert_host_all(&host, 2.0, "read after the stream was dropped");

    // Many replays on a stream that is then forgotten: it is never destroyed, and the read
    // still waits for the last replay.
    let forgotten = Stream::non_blocking(&f.ctx).unwrap();
    for _ in 0..10 {
        exec.launch(&forgotten).unwrap();
    }
    std::mem::forget(forgotten);
    assert_host_all(&host, 12.0, "read after the stream was forgotten");
    // The capture recorded nothing into `other_data`.
    assert_all(&f.stream, &other_data, 0.0);
}

fn a_replay_fence_holds_when_its_stream_joins_a_capture(ctx: &Context) {
    let f = fixture_on(ctx);
    let side = Stream::non_blocking(&f.ctx).unwrap();
    let mut data = filled(&f.stream, 0.0);
    let mut other = filled(&f.stream, 0.0);
    let mut host = PinnedBuffer::<f32>::zeros(&f.ctx, N as usize).unwrap();
    f.stream.synchronize().unwrap();
    let exec = add_one_and_copy_back(&f, &mut data, &mut host)
        .instantiate()
        .unwrap();

    // A replay on `side`, which then joins a capture begun on the fixture's stream before the
    // host reads: the read, made while `side` captures, waits for the replay and sees it.
    exec.launch(&side).unwrap();
    f.stream.begin_capture(CaptureMode::Relaxed).unwrap();
    let fork = f.stream.record().unwrap();
    side.wait_event(&fork).unwrap();
    f.add_scalar
        .launch(&side, config(), (N, 3.0f32, &mut other))
        .unwrap();
    assert_host_all(&host, 1.0, "read while the replay's stream captures");
    f.stream.join(&side).unwrap();
    let graph = f.stream.end_capture().unwrap();

    // The captured work runs only when launched.
    assert_all(&f.stream, &other, 0.0);
    graph.instantiate().unwrap().launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &other, 3.0);
    // And the replay's stream is eager again: its fences work as before.
    exec.launch(&side).unwrap();
    assert_host_all(&host, 2.0, "read after the capture");
}

fn a_forgotten_graph_still_fences_its_replays(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    let mut host = PinnedBuffer::<f32>::zeros(&f.ctx, N as usize).unwrap();
    f.stream.synchronize().unwrap();
    let exec = add_one_and_copy_back(&f, &mut data, &mut host)
        .instantiate()
        .unwrap();
    for _ in 0..5 {
        exec.launch(&f.stream).unwrap();
    }
    // The fences live in the buffer, not in the graph: forgetting the graph skips none.
    std::mem::forget(exec);
    assert_host_all(&host, 5.0, "read after the graph was forgotten");
    // Nor in a host slice: a forgotten one keeps the memory's launches refused, and the
    // host's own later slices still see the last replay's values.
    std::mem::forget(host.as_slice().unwrap());
    assert_host_all(&host, 5.0, "read after a slice was forgotten");
}

/// Counts the runtime's pinned-memory fence records and waits on records (the `tracing`
/// events of `runtime/src/cuda/fence.rs`) made on the thread it is the default of.
#[derive(Default)]
struct FenceCalls {
    records: std::sync::atomic::AtomicUsize,
    waits: std::sync::atomic::AtomicUsize,
}

impl FenceCalls {
    fn take(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.records.swap(0, Relaxed), self.waits.swap(0, Relaxed))
    }
}

/// A subscriber that counts into a shared [`FenceCalls`] and records nothing else.
struct CountFences(std::sync::Arc<FenceCalls>);

impl tracing::Subscriber for CountFences {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target().starts_with("gpu_pipeline::fence::")
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        use std::sync::atomic::Ordering::Relaxed;
        match event.metadata().target() {
            "gpu_pipeline::fence::record" => self.0.records.fetch_add(1, Relaxed),
            "gpu_pipeline::fence::wait" => self.0.waits.fetch_add(1, Relaxed),
            _ => 0,
        };
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// What issue 22 asked of the replay fences, counted: a replay followed by a synchronize and a
/// host read records no fence and waits on none (one `cuGraphLaunch` and one
/// `cuStreamSynchronize`, as the raw host loop makes); a replay read without a synchronize
/// records once and waits once; replays in a row record once each (at the next enqueue, so a
/// read waits for its own replay only). The values read are each replay's.
/// User code between two adds may leave the thread with no context current (a launch's
/// arguments are expressions): each add makes the graph's context current again, and the
/// nodes run in it, in order. (Driver 580 crashes in `cuGraphAddKernelNode` when no context
/// is current, though CUDA documents that a kernel node given a function runs in the
/// function's context: the add must keep its bind.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn kernel_nodes_added_after_the_context_was_unset_run_in_the_graphs() {
    let f = fixture();
    let mut data = filled(&f.stream, 0.0);
    f.stream.synchronize().unwrap();
    let driver = raw_driver::Driver::open().unwrap();
    // SAFETY: the exports' types as `sys` declares them.
    let (set_current, get_current) = unsafe {
        (
            driver
                .get::<gpu_pipeline::sys::PFN_cuCtxSetCurrent>(b"cuCtxSetCurrent\0")
                .unwrap(),
            driver
                .get::<gpu_pipeline::sys::PFN_cuCtxGetCurrent>(b"cuCtxGetCurrent\0")
                .unwrap(),
        )
    };
    let mut graph = Graph::new(&f.ctx).unwrap();
    let mut last = Vec::new();
    for value in [1.0f32, 2.0, 4.0] {
        // SAFETY: leaving no context current on this thread is always allowed.
        assert!(unsafe { set_current(std::ptr::null_mut()) }.is_success());
        let node = graph
            .add_kernel_node(&last, &f.add_scalar, config(), (N, value, &mut data))
            .unwrap();
        let mut current = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        assert!(unsafe { get_current(&mut current) }.is_success());
        assert_eq!(
            current,
            f.ctx.handle().unwrap(),
            "the add bound the graph's context"
        );
        last = vec![node.node()];
    }
    assert_eq!(
        graph.retained_count(),
        2,
        "the module and the buffer, once each"
    );
    let exec = graph.instantiate().unwrap();
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &data, 7.0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn replay_fences_make_no_driver_call_when_the_host_synchronizes() {
    let f = fixture();
    let mut data = filled(&f.stream, 0.0);
    let mut host = PinnedBuffer::<f32>::zeros(&f.ctx, N as usize).unwrap();
    f.stream.synchronize().unwrap();
    let exec = add_one_and_copy_back(&f, &mut data, &mut host)
        .instantiate()
        .unwrap();
    let calls = std::sync::Arc::new(FenceCalls::default());
    let subscriber = CountFences(calls.clone());
    tracing::subscriber::with_default(subscriber, || {
        let mut expected = 0.0;
        // Warm-up: the stream's first fence creates its event.
        exec.launch(&f.stream).unwrap();
        expected += 1.0;
        assert_host_all(&host, expected, "warm-up");
        calls.take();

        for round in 0..100 {
            exec.launch(&f.stream).unwrap();
            expected += 1.0;
            f.stream.synchronize().unwrap();
            assert_host_all(&host, expected, &format!("synchronized round {round}"));
        }
        assert_eq!(
            calls.take(),
            (0, 0),
            "records and waits, launch + synchronize + read"
        );

        for round in 0..100 {
            exec.launch(&f.stream).unwrap();
            expected += 1.0;
            assert_host_all(&host, expected, &format!("unsynchronized round {round}"));
        }
        assert_eq!(calls.take(), (100, 100), "records and waits, launch + read");

        for _ in 0..20 {
            exec.launch(&f.stream).unwrap();
            expected += 1.0;
        }
        assert_host_all(&host, expected, "after 20 replays");
        assert_eq!(
            calls.take(),
            (20, 1),
            "records and waits, 20 launches + read"
        );
    });
}

fn a_launch_is_refused_while_a_host_slice_of_its_memory_is_alive(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    let mut host = PinnedBuffer::<f32>::zeros(&f.ctx, N as usize).unwrap();
    f.stream.synchronize().unwrap();
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut data))?;
            s.copy_dtoh(&data, &mut host)
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&f.stream).unwrap();
    {
        // The launch borrows nothing, so only the guard keeps it from writing under `seen`.
        let seen = host.as_slice().unwrap();
        assert!(seen.iter().all(|&v| v == 1.0));
        let err = exec.launch(&f.stream).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(err.to_string().contains("drop the slice"), "{err}");
        assert!(seen.iter().all(|&v| v == 1.0));
    }
    // Dropped: launches run again.
    exec.launch(&f.stream).unwrap();
    assert!(host.as_slice().unwrap().iter().all(|&v| v == 2.0));
    // A forgotten guard only keeps later launches failing.
    std::mem::forget(host.as_mut_slice().unwrap());
    assert!(exec.launch(&f.stream).is_err());
    f.stream.synchronize().unwrap();
}

fn kernel_nodes_come_back_in_launch_order(ctx: &Context) {
    let f = fixture_on(ctx);
    let side = Stream::non_blocking(&f.ctx).unwrap();
    let x = filled(&f.stream, 1.0);
    let mut a = filled(&f.stream, 0.0);
    let mut b = filled(&f.stream, 0.0);
    f.stream.synchronize().unwrap();
    f.stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let fork = f.stream.record().unwrap();
    side.wait_event(&fork).unwrap();
    // Launch order: add_scalar(a) on the origin, saxpy(b) on the side, add_scalar(a) again.
    f.add_scalar
        .launch(&f.stream, config(), (N, 1.0f32, &mut a))
        .unwrap();
    f.saxpy
        .launch(&side, config(), (N, 2.0f32, &x, &mut b))
        .unwrap();
    f.add_scalar
        .launch(
            &f.stream,
            LaunchConfig::new(N / 64, 64),
            (N, 3.0f32, &mut a),
        )
        .unwrap();
    f.stream.join(&side).unwrap();
    let graph = f.stream.end_capture().unwrap();
    let order = graph.kernel_nodes_in_launch_order().unwrap();
    assert_eq!(order.len(), 3);
    assert!(order[0].launches(&f.add_scalar) && order[0].config() == config());
    assert!(order[1].launches(&f.saxpy) && !order[1].launches(&f.add_scalar));
    assert!(order[2].launches(&f.add_scalar));
    assert_eq!(order[2].config(), LaunchConfig::new(N / 64, 64));

    // The third launch's scalar, set through the node found by launch order.
    let mut exec = graph.instantiate().unwrap();
    exec.set_kernel_params(
        &order[2],
        &f.add_scalar,
        LaunchConfig::new(N / 64, 64),
        (N, 10.0f32, &mut a),
    )
    .unwrap();
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &a, 11.0);
    assert_all(&f.stream, &b, 2.0);
}

fn a_clone_gets_the_nodes_its_original_nodes_became(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    let x = filled(&f.stream, 1.0);
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut data))?;
            f.saxpy.launch(s, config(), (N, 2.0f32, &x, &mut data))
        })
        .unwrap();
    let nodes = graph.kernel_nodes_in_launch_order().unwrap();
    let (clone, cloned) = graph.try_clone_with_nodes(&nodes).unwrap();
    assert_eq!(cloned.len(), 2);
    assert!(cloned[0].launches(&f.add_scalar) && cloned[1].launches(&f.saxpy));
    assert_eq!(cloned[1].config(), nodes[1].config());
    assert_eq!(clone.node_count().unwrap(), graph.node_count().unwrap());
    let original = graph.instantiate().unwrap();
    let mut copy = clone.instantiate().unwrap();
    // The clone's node takes new parameters; the original keeps its own.
    copy.set_kernel_params(&cloned[0], &f.add_scalar, config(), (N, 10.0f32, &mut data))
        .unwrap();
    // A node of the original is not one of the clone's.
    let err = copy
        .set_kernel_params(&nodes[0], &f.add_scalar, config(), (N, 1.0f32, &mut data))
        .unwrap_err();
    assert!(err.to_string().contains("another graph"), "{err}");
    original.launch(&f.stream).unwrap(); // 0 + 1 + 2
    copy.launch(&f.stream).unwrap(); // 3 + 10 + 2
    f.stream.synchronize().unwrap();
    assert_all(&f.stream, &data, 15.0);
    // Nodes of another graph are refused.
    let err = clone.try_clone_with_nodes(&nodes).unwrap_err();
    assert!(err.to_string().contains("another graph"), "{err}");
}

/// A kernel node's dependencies must be nodes of the scope it is added to: one of another
/// graph, or of a conditional body, is refused, and the graph is left as it was (then still
/// builds and runs).
fn a_kernel_node_after_a_stranger_is_refused_and_adds_nothing(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 1.0);
    let go = DeviceBuffer::from_slice(&f.stream, &[1u32]).unwrap();
    f.stream.synchronize().unwrap();
    let mut other = Graph::new(&f.ctx).unwrap();
    let stranger = other.add_empty_node(&[]).unwrap();
    let mut graph = Graph::new(&f.ctx).unwrap();
    let first = graph
        .add_kernel_node(&[], &f.add_scalar, config(), (N, 1.0f32, &mut data))
        .unwrap();
    let mut inside = None;
    let branch = graph
        .add_if_node(&[first.node()], Condition::value(&go), |body| {
            inside = Some(body.add_empty_node(&[])?);
            Ok(())
        })
        .unwrap();
    let inside = inside.expect("the body was built");
    let count = graph.node_count().unwrap();
    for (after, why) in [
        (vec![stranger], "another graph"),
        (vec![branch, stranger], "another graph"),
        (vec![inside], "another conditional body"),
    ] {
        let err = graph
            .add_kernel_node(&after, &f.add_scalar, config(), (N, 5.0f32, &mut data))
            .unwrap_err();
        assert!(err.to_string().contains(why), "{why}: {err}");
        assert_eq!(
            graph.node_count().unwrap(),
            count,
            "{why}: a node was added"
        );
    }
    graph
        .add_kernel_node(&[branch], &f.add_scalar, config(), (N, 2.0f32, &mut data))
        .unwrap();
    graph.instantiate().unwrap().launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    drop(graph);
    assert_all(&f.stream, &data, 4.0);
}

/// CUDA orders each launch of an executable graph behind its earlier launches, whatever
/// streams they went to: a graph that adds to `data` launched on two streams in turn adds
/// every time, with no race between its launches (the checked backend ran them at once).
fn launches_of_one_executable_graph_on_two_streams_run_one_after_the_other(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = filled(&f.stream, 0.0);
    f.stream.synchronize().unwrap();
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            f.add_scalar.launch(s, config(), (N, 1.0f32, &mut data))
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    let (first, second) = (
        Stream::non_blocking(&f.ctx).unwrap(),
        Stream::non_blocking(&f.ctx).unwrap(),
    );
    for _ in 0..5 {
        exec.launch(&first).unwrap();
        exec.launch(&second).unwrap();
    }
    first.synchronize().unwrap();
    second.synchronize().unwrap();
    drop((exec, graph));
    assert_all(&f.stream, &data, 10.0);
}
