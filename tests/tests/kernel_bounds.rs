//! Kernel bounds end to end (issue 12, item 1). `saxpy(n, a, x, y)` indexes `x` and `y` below
//! the `n` it is given; declared so (`y: &mut [f32; n]`, or `Bounds` at the runtime level), no
//! safe path lets an `n` past a buffer reach the kernel. An eager run, a capture, a generated
//! setter (in place, and re-capturing), a typed launch, `GraphExec::set_kernel_params` and
//! `Graph::add_kernel_node` each refuse it (a launch inside a `while`/`if` body too, issue 21) with `Error::KernelBound` before anything is
//! enqueued or changed: the step's other stages did not run, the graph keeps its previous
//! parameters, the buffers and the canary behind them keep their values.
//!
//! Every scenario runs on the CPU backend in checked mode (CI) and on CUDA device 0 with the
//! real PTX (ignored without a GPU). In the runtime scenarios the buffer under test is the
//! first half of one allocation and the canary its second half, so the canary is certainly
//! adjacent (the CUDA-only control shows an unchecked launch with the same `n` does write
//! into it); in the pipeline scenarios the canary is a buffer allocated right after it.

use gpu_pipeline::{
    Bound, BoundProblem, Bounds, CaptureMode, Context, CpuKernel, DeviceBuffer, Error, Graph,
    LaunchConfig, Module, PinnedBuffer, Stream, TypedKernel, gpu_pipeline,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

/// Elements of the buffer under test.
const N: usize = 1000;
/// What a canary holds; a kernel that reached it would change it.
const CANARY: f32 = -7.5;

/// The CPU implementations of `test_kernels.cu`. They index with the `n` they are given, as
/// the CUDA kernels do: only the bound check keeps them within the buffers.
mod cpu_impl {
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v += value;
        }
    }

    pub fn add_scalar_signed(n: i32, value: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v += value;
        }
    }
}

gpu_pipeline! {
    /// `mark` cleared, then `y += a * x` below `n`, then `y` copied out on another stream.
    pipeline Axpy {
        streams { compute, copy }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            /// `if (i < n) y[i] = a * x[i] + y[i];`: `x` and `y` are indexed below `n`.
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu_impl::saxpy;
        }
        params {
            n: u32, a: f32,
            x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>,
            mark: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>,
        }
        stage clear on compute { fill mark = 0.0f32; }
        stage axpy on compute { launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256; }
        stage download on copy { copy y -> out; }
    }
}

gpu_pipeline! {
    /// `mark` set to `n`, then `y += a * x` below `n`: `set_n` captures the step again.
    pipeline Refill {
        streams { compute }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu_impl::saxpy;
        }
        params { n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, mark: &mut DeviceBuffer<f32> }
        stage count on compute { fill mark = n as f32; }
        stage axpy on compute { launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256; }
    }
}

gpu_pipeline! {
    /// `y += a * tmp` below `n`, where `tmp` is scratch of length `n` filled with ones: `set_n`
    /// captures the step again (with a new `tmp`), `set_a` updates the launch in place.
    pipeline Rescratch {
        streams { compute }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu_impl::saxpy;
        }
        params { n: u32, a: f32, y: &mut DeviceBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = n as usize }
        stage ones on compute { fill tmp = 1.0f32; }
        stage axpy on compute { launch k::saxpy(n, a, tmp, y) grid n.div_ceil(256) block 256; }
    }
}

type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);

/// `saxpy` indexes `x` (position 2) and `y` (position 3) below `n` (position 0).
const SAXPY: Bounds = Bounds::new()
    .names(&["n", "a", "x", "y"])
    .buffer(2, Bound::param(0))
    .buffer(3, Bound::param(0));

fn module(ctx: &Context) -> Module {
    Module::load_ptx(ctx, PTX).unwrap().named("test_kernels")
}

fn saxpy(module: &Module) -> TypedKernel<Saxpy> {
    // SAFETY: `saxpy(unsigned n, float a, const float* x, float* y)` writes only `y` and
    // indexes `x` and `y` only below `n` (`if (i < n)`; test_kernels.cu).
    let kernel = unsafe {
        module
            .function("saxpy")
            .unwrap()
            .typed_with_bounds::<Saxpy>(SAXPY)
            .unwrap()
    };
    kernel.with_cpu(CpuKernel::new(cpu_impl::saxpy))
}

/// `0, 1, 2, ...` as floats.
fn ramp(len: usize) -> Vec<f32> {
    (0..len).map(|i| i as f32).collect()
}

/// `1 + a * x[i]` below `n`, `1` from `n` to `N`.
fn after_axpy(n: usize, a: f32) -> Vec<f32> {
    (0..N)
        .map(|i| if i < n { 1.0 + a * i as f32 } else { 1.0 })
        .collect()
}

/// `err` is a refusal of `y` (of `N` elements) by `saxpy` with `n` = `N + 1`, from `call`.
#[track_caller]
fn assert_refused(err: &Error, call: &str, module: &str) {
    let Error::KernelBound {
        call: refused_by,
        violation,
    } = err
    else {
        panic!("expected a bound refusal, got {err:?}");
    };
    assert_eq!(*refused_by, call);
    assert_eq!(violation.kernel, "saxpy");
    assert_eq!(violation.module, module);
    assert_eq!(violation.buffer, "y");
    assert_eq!(violation.bound, "n");
    assert_eq!(
        violation.problem,
        BoundProblem::TooShort {
            bound: N as u64 + 1,
            len: N
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{call}: kernel `saxpy` of module `{module}` indexes `y` below `n` = {}, but the \
             buffer passed for `y` holds {N} elements; pass a longer buffer or smaller arguments",
            N + 1
        )
    );
}

/// `err` is a refusal by a pipeline's `stage`, before anything of the step was enqueued.
#[track_caller]
fn assert_stage_refused(err: &Error, pipeline: &str, stage: &str) {
    match err {
        Error::Stage {
            pipeline: p,
            stage: s,
            source,
        } if *p == pipeline && *s == stage => {
            assert_refused(source, "TypedKernel::check_bounds", "k");
            // The message names the cause, not only the stage, and a chain walker (the
            // one-line report) prints it once.
            let message = err.to_string();
            assert_eq!(
                message,
                format!("pipeline `{pipeline}`, stage `{stage}`: a statement failed: {source}")
            );
            assert!(
                message.contains(&format!("holds {N} elements")),
                "{message}"
            );
            assert_eq!(err.report().to_string(), message);
            assert!(std::error::Error::source(err).is_none());
            // The accessors look through the wrapper.
            assert!(matches!(err.root(), Error::KernelBound { .. }));
            let violation = err.kernel_bound().expect("a bound refusal");
            assert_eq!(
                (violation.kernel.as_str(), violation.buffer.as_str()),
                ("saxpy", "y")
            );
        }
        other => panic!("expected stage `{stage}` to refuse, got {other:?}"),
    }
}

/// The buffers of one pipeline scenario: `x` longer than `y`, so `y` is the one refused.
struct Buffers {
    stream: Stream,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    canary: DeviceBuffer<f32>,
    mark: DeviceBuffer<f32>,
}

impl Buffers {
    fn new(ctx: &Context) -> Buffers {
        let stream = Stream::non_blocking(ctx).unwrap();
        let x = DeviceBuffer::from_slice(&stream, &ramp(2 * N)).unwrap();
        let y = DeviceBuffer::from_slice(&stream, &vec![1.0f32; N]).unwrap();
        let canary = DeviceBuffer::from_slice(&stream, &vec![CANARY; N]).unwrap();
        let mark = DeviceBuffer::from_slice(&stream, &[5.0f32; 4]).unwrap();
        stream.synchronize().unwrap();
        Buffers {
            stream,
            x,
            y,
            canary,
            mark,
        }
    }

    #[track_caller]
    fn assert(&self, y: &[f32], mark: f32) {
        assert_eq!(self.y.to_vec(&self.stream).unwrap(), y, "y");
        assert_eq!(self.mark.to_vec(&self.stream).unwrap(), [mark; 4], "mark");
        assert_eq!(
            self.canary.to_vec(&self.stream).unwrap(),
            vec![CANARY; N],
            "the canary"
        );
    }
}

fn eager_run_refuses_before_enqueuing_anything(ctx: &Context) {
    let mut b = Buffers::new(ctx);
    let mut out = PinnedBuffer::zeros(ctx, N).unwrap();
    let mut pipeline = Axpy::new(ctx).unwrap();
    let refused = pipeline.run(AxpyParams {
        n: N as u32 + 1,
        a: 2.0,
        x: &b.x,
        y: &mut b.y,
        mark: &mut b.mark,
        out: &mut out,
    });
    assert_stage_refused(&refused.map(|_| ()).unwrap_err(), "Axpy", "axpy");
    // Not even `clear`, the stage before, ran.
    b.assert(&vec![1.0; N], 5.0);

    // A step that fits runs.
    pipeline
        .run(AxpyParams {
            n: N as u32,
            a: 2.0,
            x: &b.x,
            y: &mut b.y,
            mark: &mut b.mark,
            out: &mut out,
        })
        .unwrap()
        .wait()
        .unwrap();
    b.assert(&after_axpy(N, 2.0), 0.0);
    assert_eq!(out.to_vec().unwrap(), after_axpy(N, 2.0));
}

fn capture_refuses(ctx: &Context) {
    let mut b = Buffers::new(ctx);
    let mut out = PinnedBuffer::zeros(ctx, N).unwrap();
    let mut pipeline = Axpy::new(ctx).unwrap();
    let refused = pipeline.capture(AxpyParams {
        n: N as u32 + 1,
        a: 2.0,
        x: &b.x,
        y: &mut b.y,
        mark: &mut b.mark,
        out: &mut out,
    });
    assert_stage_refused(&refused.map(|_| ()).unwrap_err(), "Axpy", "axpy");
    b.assert(&vec![1.0; N], 5.0);

    // The pipeline captures a step that fits afterwards.
    let mut graph = pipeline
        .capture(AxpyParams {
            n: N as u32,
            a: 2.0,
            x: &b.x,
            y: &mut b.y,
            mark: &mut b.mark,
            out: &mut out,
        })
        .unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    b.assert(&after_axpy(N, 2.0), 0.0);
}

fn setter_refuses_and_the_graph_keeps_its_parameters(ctx: &Context) {
    let mut b = Buffers::new(ctx);
    let mut out = PinnedBuffer::zeros(ctx, N).unwrap();
    let mut pipeline = Axpy::new(ctx).unwrap();
    let half = N / 2;
    let mut graph = pipeline
        .capture(AxpyParams {
            n: half as u32,
            a: 1.0,
            x: &b.x,
            y: &mut b.y,
            mark: &mut b.mark,
            out: &mut out,
        })
        .unwrap();
    graph.launch().unwrap();
    let err = graph.set_n(N as u32 + 1).unwrap_err();
    assert_stage_refused(&err, "Axpy", "axpy");
    assert_eq!(graph.params().n, half as u32, "the previous value stays");
    // The replay still runs the previous `n`: two launches of `y += x` below `half`.
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    // A value that fits is taken.
    graph.set_n(N as u32).unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    let want: Vec<f32> = (0..N)
        .map(|i| {
            if i < half {
                1.0 + 3.0 * i as f32
            } else {
                1.0 + i as f32
            }
        })
        .collect();
    b.assert(&want, 0.0);
}

fn recapturing_setter_refuses_and_the_graph_keeps_its_parameters(ctx: &Context) {
    let mut b = Buffers::new(ctx);
    let mut pipeline = Refill::new(ctx).unwrap();
    let half = N / 2;
    let mut graph = pipeline
        .capture(RefillParams {
            n: half as u32,
            a: 2.0,
            x: &b.x,
            y: &mut b.y,
            mark: &mut b.mark,
        })
        .unwrap();
    let err = graph.set_n(N as u32 + 1).unwrap_err();
    assert_stage_refused(&err, "Refill", "axpy");
    assert_eq!(graph.params().n, half as u32, "the previous value stays");
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    b.assert(&after_axpy(half, 2.0), half as f32);
}

/// A refused re-capture puts back the scratch buffers the graph uses: a later in-place setter
/// updates the launch over the same `tmp` the graph's `fill` writes.
fn refused_recapture_keeps_the_graphs_scratch_buffers(ctx: &Context) {
    let mut b = Buffers::new(ctx);
    let mut pipeline = Rescratch::new(ctx).unwrap();
    let half = N / 2;
    let mut graph = pipeline
        .capture(RescratchParams {
            n: half as u32,
            a: 1.0,
            y: &mut b.y,
        })
        .unwrap();
    let err = graph.set_n(N as u32 + 1).unwrap_err();
    assert_stage_refused(&err, "Rescratch", "axpy");
    graph.set_a(3.0).unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    // `y += 3 * 1` below `half`: the launch read the `tmp` that `ones` filled.
    let want: Vec<f32> = (0..N).map(|i| if i < half { 4.0 } else { 1.0 }).collect();
    b.assert(&want, 5.0);
}

fn typed_launch_refuses(ctx: &Context) {
    let stream = Stream::non_blocking(ctx).unwrap();
    let saxpy = saxpy(&module(ctx));
    let x = DeviceBuffer::from_slice(&stream, &ramp(2 * N)).unwrap();
    let mut whole =
        DeviceBuffer::from_slice(&stream, &[vec![1.0f32; N], vec![CANARY; N]].concat()).unwrap();
    {
        let (mut y, _canary) = whole.split_at_mut(N).unwrap();
        let err = saxpy
            .launch(
                &stream,
                LaunchConfig::for_elements(N as u32 + 1, 256),
                (N as u32 + 1, 2.0f32, &x, &mut y),
            )
            .unwrap_err();
        assert_refused(&err, "TypedKernel::launch", "test_kernels");
        // The same check, without launching.
        let err = saxpy
            .check_bounds(&(N as u32 + 1, 2.0f32, &x, &y))
            .unwrap_err();
        assert_refused(&err, "TypedKernel::check_bounds", "test_kernels");
        assert!(saxpy.check_bounds(&(N as u32, 2.0f32, &x, &y)).is_ok());
        saxpy
            .launch(
                &stream,
                LaunchConfig::for_elements(N as u32, 256),
                (N as u32, 2.0f32, &x, &mut y),
            )
            .unwrap();
    }
    let got = whole.to_vec(&stream).unwrap();
    assert_eq!(got[..N], after_axpy(N, 2.0));
    assert_eq!(got[N..], vec![CANARY; N], "the canary");
}

fn set_kernel_params_refuses_and_the_node_keeps_its_parameters(ctx: &Context) {
    let stream = Stream::non_blocking(ctx).unwrap();
    let saxpy = saxpy(&module(ctx));
    let x = DeviceBuffer::from_slice(&stream, &ramp(2 * N)).unwrap();
    let mut whole =
        DeviceBuffer::from_slice(&stream, &[vec![1.0f32; N], vec![CANARY; N]].concat()).unwrap();
    stream.synchronize().unwrap();
    let half = N / 2;
    {
        let (mut y, _canary) = whole.split_at_mut(N).unwrap();
        stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
        let launched = saxpy.launch(
            &stream,
            LaunchConfig::for_elements(half as u32, 256),
            (half as u32, 2.0f32, &x, &mut y),
        );
        let graph = stream.end_capture().unwrap();
        launched.unwrap();
        let mut exec = graph.instantiate().unwrap();
        let nodes = graph.kernel_nodes_in_launch_order().unwrap();
        let err = exec
            .set_kernel_params(
                &nodes[0],
                &saxpy,
                LaunchConfig::for_elements(N as u32 + 1, 256),
                (N as u32 + 1, 2.0f32, &x, &mut y),
            )
            .unwrap_err();
        assert_refused(&err, "GraphExec::set_kernel_params", "test_kernels");
        // The node keeps `n` = `half`.
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
    }
    let got = whole.to_vec(&stream).unwrap();
    assert_eq!(got[..N], after_axpy(half, 2.0));
    assert_eq!(got[N..], vec![CANARY; N], "the canary");
}

/// `KernelUpdates::set_unchecked`: arguments checked once (`check_bounds`) update every node
/// without a check per node; what the batch checks besides the bounds (the node launches
/// this kernel) it still checks.
fn set_unchecked_updates_the_nodes_its_one_check_covers(ctx: &Context) {
    let stream = Stream::non_blocking(ctx).unwrap();
    let module = module(ctx);
    let saxpy = saxpy(&module);
    // SAFETY: `add_scalar(unsigned n, float value, float* data)` indexes `data` below `n`;
    // never launched here, only offered to a node that launches another kernel.
    let add = unsafe {
        module
            .function("add_scalar")
            .unwrap()
            .typed::<(u32, f32, &mut [f32])>()
            .unwrap()
    }
    .with_cpu(CpuKernel::new(cpu_impl::add_scalar));
    let x = DeviceBuffer::from_slice(&stream, &ramp(2 * N)).unwrap();
    let mut whole =
        DeviceBuffer::from_slice(&stream, &[vec![1.0f32; N], vec![CANARY; N]].concat()).unwrap();
    stream.synchronize().unwrap();
    let half = N / 2;
    {
        let (mut y, _canary) = whole.split_at_mut(N).unwrap();
        let small = LaunchConfig::for_elements(half as u32, 256);
        let graph = stream
            .capture(CaptureMode::ThreadLocal, |s| {
                saxpy.launch(s, small, (half as u32, 5.0f32, &x, &mut y))?;
                saxpy.launch(s, small, (half as u32, 5.0f32, &x, &mut y))
            })
            .unwrap();
        let mut exec = graph.instantiate().unwrap();
        let nodes = graph.kernel_nodes_in_launch_order().unwrap();
        assert_eq!(nodes.len(), 2);
        // Every node gets the same arguments: checked once.
        let whole_y = LaunchConfig::for_elements(N as u32, 256);
        saxpy.check_bounds(&(N as u32, 1.0f32, &x, &y)).unwrap();
        let mut updates = exec.kernel_updates().unwrap();
        for node in &nodes {
            // SAFETY: these arguments passed `check_bounds` just above.
            unsafe { updates.set_unchecked(node, &saxpy, whole_y, (N as u32, 1.0f32, &x, &mut y)) }
                .unwrap();
        }
        // SAFETY: `add_scalar` declares no bounds; `n` is within `y` anyway.
        let err =
            unsafe { updates.set_unchecked(&nodes[0], &add, whole_y, (N as u32, 1.0f32, &mut y)) }
                .unwrap_err();
        assert!(
            err.to_string().contains("does not launch `add_scalar`"),
            "{err}"
        );
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
    }
    let got = whole.to_vec(&stream).unwrap();
    // Both nodes now add `1.0 * x` to all of `y`; the refused update changed nothing.
    let want: Vec<f32> = (0..N).map(|i| 1.0 + 2.0 * i as f32).collect();
    assert_eq!(got[..N], want);
    assert_eq!(got[N..], vec![CANARY; N], "the canary");
}

/// A negative scalar bounds nothing, and neither does one whose bound overflows a `u64`.
fn negative_and_overflowing_bounds_are_refused(ctx: &Context) {
    let stream = Stream::non_blocking(ctx).unwrap();
    let module = module(ctx);
    let mut data = DeviceBuffer::from_slice(&stream, &[1.0f32; 8]).unwrap();

    // SAFETY: `add_scalar(unsigned n, float value, float* data)` indexes `data` below `n`;
    // `i32` has the layout of `unsigned`, and the bound refuses every negative `n`, so the
    // kernel only ever sees values it reads the same as unsigned.
    let signed = unsafe {
        module
            .function("add_scalar")
            .unwrap()
            .typed_with_bounds::<(i32, f32, &'static mut [f32])>(
                Bounds::new()
                    .names(&["n", "value", "data"])
                    .buffer(2, Bound::param(0)),
            )
            .unwrap()
    }
    .with_cpu(CpuKernel::new(cpu_impl::add_scalar_signed));
    let err = signed
        .launch(
            &stream,
            LaunchConfig::new(1, 256),
            (-1i32, 1.0f32, &mut data),
        )
        .unwrap_err();
    match &err {
        Error::KernelBound { violation, .. } => {
            assert_eq!(
                violation.problem,
                BoundProblem::Negative {
                    param: "n".to_owned()
                }
            );
            assert_eq!(violation.values, [("n".to_owned(), -1)]);
        }
        other => panic!("expected a bound refusal, got {other:?}"),
    }
    signed
        .launch(
            &stream,
            LaunchConfig::new(1, 256),
            (8i32, 1.0f32, &mut data),
        )
        .unwrap();

    // SAFETY: `add_scalar` indexes `data` below `n`, so below `n⁴` too for every `n`.
    let quartic = unsafe {
        module
            .function("add_scalar")
            .unwrap()
            .typed_with_bounds::<(u32, f32, &'static mut [f32])>(
                Bounds::new().buffer(2, Bound::param(0).times(0).times(0).times(0)),
            )
            .unwrap()
    }
    .with_cpu(CpuKernel::new(cpu_impl::add_scalar));
    let err = quartic
        .launch(
            &stream,
            LaunchConfig::new(1, 256),
            (1u32 << 16, 1.0f32, &mut data),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::KernelBound { violation, .. } if violation.problem == BoundProblem::Overflow),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "TypedKernel::launch: kernel `add_scalar` of module `test_kernels` indexes `parameter 2` \
         below `parameter 0 * parameter 0 * parameter 0 * parameter 0`, which overflows a u64 \
         (parameter 0 = 65536, parameter 0 = 65536, parameter 0 = 65536, parameter 0 = 65536)"
    );
    assert_eq!(data.to_vec(&stream).unwrap(), [2.0f32; 8]);
}

/// A declaration the signature contradicts is refused when the kernel is declared.
fn declarations_are_checked_against_the_signature(ctx: &Context) {
    let function = module(ctx).function("saxpy").unwrap();
    let refused = |bounds: Bounds| {
        // SAFETY: never launched: each declaration below is refused.
        match unsafe { function.typed_with_bounds::<Saxpy>(bounds) } {
            Err(Error::InvalidArgument { call, message }) => {
                assert_eq!(call, "Kernel::typed_with_bounds");
                message
            }
            other => panic!("expected a refused declaration, got {other:?}"),
        }
    };
    let names: &'static [&'static str] = &["n", "a", "x", "y"];
    assert_eq!(
        refused(Bounds::new().names(names).buffer(0, Bound::param(0))),
        "`saxpy` of module `test_kernels`: `n` is a scalar: only buffers (`&[T]`, `&mut [T]`) \
         take bounds"
    );
    assert!(
        refused(Bounds::new().names(names).buffer(3, Bound::param(1)))
            .contains("the bound of `y` names `a`, which is not an integer")
    );
    assert!(refused(Bounds::new().buffer(3, Bound::param(2))).contains("which is a buffer"));
    assert!(
        refused(
            Bounds::new()
                .buffer(3, Bound::param(0))
                .buffer(3, Bound::param(0))
        )
        .contains("two bounds")
    );
}

gpu_pipeline! {
    /// Inside a `while` (and an `if` nested in another): `flag` goes up by one, then a launch
    /// bounded by `n` (issue 21, item 3: the flag went up before the bound was refused).
    pipeline Guarded {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu_impl::add_scalar;
        }
        params {
            n: u32, every: u32,
            go: &mut DeviceBuffer<u32>, flag: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>, z: &mut DeviceBuffer<f32>,
        }
        stage top on main {
            while go != 0u32 max 2 {
                launch k::add_scalar(1u32, 1.0f32, flag) grid 1u32 block 1u32;
                launch k::add_scalar(n, 1.0f32, y) grid n.div_ceil(256) block 256;
                fill go = 0u32;
            }
        }
        stage nested on main {
            while go == 0u32 max 2 {
                fill go = 1u32;
                launch k::add_scalar(1u32, 1.0f32, flag) grid 1u32 block 1u32;
                if step % every == 0 {
                    launch k::add_scalar(n, 1.0f32, z) grid n.div_ceil(256) block 256;
                }
            }
        }
    }
}

/// A bound broken inside a `while` body, or inside an `if` nested in one, refuses the whole
/// step before anything is enqueued, eagerly and when capturing: no body's earlier launch ran
/// (`flag` stays 0), `go`, `y` and `z` are untouched, and the error is the bound's, for the
/// stage whose body breaks it. (`y` holds `N` elements, `z` half as many.)
fn bounds_in_bodies_are_checked_before_anything_runs(ctx: &Context) {
    let stream = Stream::non_blocking(ctx).unwrap();
    let mut go = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let mut flag = DeviceBuffer::from_slice(&stream, &[0.0f32]).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &vec![1.0f32; N]).unwrap();
    let mut z = DeviceBuffer::from_slice(&stream, &vec![1.0f32; N / 2]).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Guarded::new(ctx).unwrap();
    // `n` past `y` breaks `top`'s bound; `n` = `N` fits `y` but not `z`, which only the
    // nested `if` of the second stage launches on.
    for (n, stage) in [(N + 1, "top"), (N, "nested")] {
        for capture in [false, true] {
            let params = GuardedParams {
                n: n as u32,
                every: 1,
                go: &mut go,
                flag: &mut flag,
                y: &mut y,
                z: &mut z,
            };
            let refused = if capture {
                pipeline.capture(params).map(|_| ())
            } else {
                pipeline.run(params).map(|_| ())
            };
            match refused.unwrap_err() {
                Error::Stage {
                    pipeline: "Guarded",
                    stage: s,
                    source,
                } if s == stage => match *source {
                    Error::KernelBound { violation, .. } => {
                        assert_eq!(violation.kernel, "add_scalar");
                        assert_eq!(
                            (violation.buffer.as_str(), violation.bound.as_str()),
                            ("data", "n")
                        );
                    }
                    other => panic!("expected a bound refusal, got {other:?}"),
                },
                other => panic!("expected stage `{stage}` to refuse, got {other:?}"),
            }
            pipeline.context().synchronize().unwrap();
            let what = format!("n = {n}, capture: {capture}");
            assert_eq!(go.to_vec(&stream).unwrap(), [1], "go, {what}");
            assert_eq!(flag.to_vec(&stream).unwrap(), [0.0], "flag, {what}");
            assert_eq!(y.to_vec(&stream).unwrap(), vec![1.0; N], "y, {what}");
            assert_eq!(z.to_vec(&stream).unwrap(), vec![1.0; N / 2], "z, {what}");
        }
    }

    // A step that fits runs each body once: `top` sets `go` to 0, `nested` back to 1.
    pipeline
        .run(GuardedParams {
            n: (N / 2) as u32,
            every: 1,
            go: &mut go,
            flag: &mut flag,
            y: &mut y,
            z: &mut z,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(go.to_vec(&stream).unwrap(), [1]);
    assert_eq!(flag.to_vec(&stream).unwrap(), [2.0]);
    let mut want = vec![2.0; N / 2];
    want.resize(N, 1.0);
    assert_eq!(y.to_vec(&stream).unwrap(), want);
    assert_eq!(z.to_vec(&stream).unwrap(), vec![2.0; N / 2]);
}

macro_rules! on_both_backends {
    ($($scenario:ident => $cpu:ident, $cuda:ident;)*) => {$(
        #[test]
        fn $cpu() {
            let ctx = Context::cpu_checked();
            $scenario(&ctx);
            assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
        }

        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn $cuda() {
            $scenario(&Context::cuda(0).expect("a CUDA device"));
        }
    )*};
}

on_both_backends! {
    eager_run_refuses_before_enqueuing_anything =>
        cpu_eager_run_refuses_before_enqueuing_anything,
        cuda_eager_run_refuses_before_enqueuing_anything;
    capture_refuses => cpu_capture_refuses, cuda_capture_refuses;
    setter_refuses_and_the_graph_keeps_its_parameters =>
        cpu_setter_refuses_and_the_graph_keeps_its_parameters,
        cuda_setter_refuses_and_the_graph_keeps_its_parameters;
    recapturing_setter_refuses_and_the_graph_keeps_its_parameters =>
        cpu_recapturing_setter_refuses_and_the_graph_keeps_its_parameters,
        cuda_recapturing_setter_refuses_and_the_graph_keeps_its_parameters;
    refused_recapture_keeps_the_graphs_scratch_buffers =>
        cpu_refused_recapture_keeps_the_graphs_scratch_buffers,
        cuda_refused_recapture_keeps_the_graphs_scratch_buffers;
    typed_launch_refuses => cpu_typed_launch_refuses, cuda_typed_launch_refuses;
    set_kernel_params_refuses_and_the_node_keeps_its_parameters =>
        cpu_set_kernel_params_refuses_and_the_node_keeps_its_parameters,
        cuda_set_kernel_params_refuses_and_the_node_keeps_its_parameters;
    set_unchecked_updates_the_nodes_its_one_check_covers =>
        cpu_set_unchecked_updates_the_nodes_its_one_check_covers,
        cuda_set_unchecked_updates_the_nodes_its_one_check_covers;
    negative_and_overflowing_bounds_are_refused =>
        cpu_negative_and_overflowing_bounds_are_refused,
        cuda_negative_and_overflowing_bounds_are_refused;
    bounds_in_bodies_are_checked_before_anything_runs =>
        cpu_bounds_in_bodies_are_checked_before_anything_runs,
        cuda_bounds_in_bodies_are_checked_before_anything_runs;
    declarations_are_checked_against_the_signature =>
        cpu_declarations_are_checked_against_the_signature,
        cuda_declarations_are_checked_against_the_signature;
}

/// `Graph::add_kernel_node` (CUDA only) refuses a node that breaks a bound; nothing is added.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_add_kernel_node_refuses() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    let stream = Stream::non_blocking(&ctx).unwrap();
    let saxpy = saxpy(&module(&ctx));
    let x = DeviceBuffer::from_slice(&stream, &ramp(2 * N)).unwrap();
    let mut whole =
        DeviceBuffer::from_slice(&stream, &[vec![1.0f32; N], vec![CANARY; N]].concat()).unwrap();
    let mut graph = Graph::new(&ctx).unwrap();
    {
        let (mut y, _canary) = whole.split_at_mut(N).unwrap();
        let err = graph
            .add_kernel_node(
                &[],
                &saxpy,
                LaunchConfig::for_elements(N as u32 + 1, 256),
                (N as u32 + 1, 2.0f32, &x, &mut y),
            )
            .unwrap_err();
        assert_refused(&err, "Graph::add_kernel_node", "test_kernels");
        assert_eq!(graph.node_count().unwrap(), 0);
        graph
            .add_kernel_node(
                &[],
                &saxpy,
                LaunchConfig::for_elements(N as u32, 256),
                (N as u32, 2.0f32, &x, &mut y),
            )
            .unwrap();
    }
    graph.instantiate().unwrap().launch(&stream).unwrap();
    stream.synchronize().unwrap();
    let got = whole.to_vec(&stream).unwrap();
    assert_eq!(got[..N], after_axpy(N, 2.0));
    assert_eq!(got[N..], vec![CANARY; N], "the canary");
}

/// The control: the canary really is the memory right after `y`. Without the check (an
/// unchecked launch with the same `n`), the kernel writes into it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_an_unchecked_launch_would_write_into_the_canary() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    let stream = Stream::non_blocking(&ctx).unwrap();
    let function = module(&ctx).function("saxpy").unwrap();
    let x = DeviceBuffer::from_slice(&stream, &ramp(2 * N)).unwrap();
    let mut whole =
        DeviceBuffer::from_slice(&stream, &[vec![1.0f32; N], vec![CANARY; N]].concat()).unwrap();
    let past = 16;
    {
        let (mut y, _canary) = whole.split_at_mut(N).unwrap();
        let n = (N + past) as u32;
        // SAFETY: the arguments match `saxpy(unsigned, float, const float*, float*)`. The
        // kernel indexes `y` up to `N + 16`, past the view, which this test does on purpose:
        // those elements are the start of `_canary`, the other half of the same allocation,
        // which this test holds exclusively (both views borrow `whole` mutably) and reads
        // only after the stream is synchronized. No other memory is touched (`x` holds `2N`).
        unsafe {
            function
                .launch(
                    &stream,
                    LaunchConfig::for_elements(n, 256),
                    (n, 2.0f32, &x, &mut y),
                )
                .unwrap();
        }
        stream.synchronize().unwrap();
    }
    let got = whole.to_vec(&stream).unwrap();
    assert_eq!(got[..N], after_axpy(N, 2.0));
    let written: Vec<f32> = (N..N + past).map(|i| CANARY + 2.0 * i as f32).collect();
    assert_eq!(
        got[N..N + past],
        written,
        "the unchecked launch reached the canary"
    );
    assert_eq!(got[N + past..], vec![CANARY; N - past]);
}
