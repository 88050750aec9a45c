//! A generated pipeline against the same work written by hand against the runtime and as raw
//! driver calls, measured in one run on one GPU.
//!
//! | case | work per iteration |
//! | --- | --- |
//! | `eager 1 kernel` | one empty-kernel step, 10 000 steps enqueued, then one synchronize |
//! | `eager 1 kernel: tracked vs untracked` | the step with fault tracking on against off (the default) |
//! | `raw: launch + mark vs launch` | raw `cuLaunchKernel` followed by the `cuStreamWriteValue64` a tracked stage enqueues, against the launch alone: the driver's floor for the row above |
//! | `eager cross-stream` | kernel on A, record, B waits, kernel on B, record, A waits; 10 000 steps |
//! | `capture 100 kernels` | begin capture, 100 launches, end, instantiate |
//! | `replay 100 kernels` | one launch of the instantiated 100-kernel graph, 1 000 replays |
//! | `replay 100 kernels: tracked vs untracked` | the replay with fault tracking on against off (the default) |
//! | `set scalar` | update the scalar of all 100 kernel nodes in place (one batch; each sample times 20 of them) |
//! | `set 2 scalars, apply once` | both scalars of all 100 nodes changed, then one `apply_updates`; runtime and raw columns repeat `set scalar`'s |
//! | `recapture every sweep` | jacobiCudaGraphs' method 1: the one-kernel step recorded again with its two grids exchanged, the executable graph updated from it (`cuGraphExecUpdate`), launched and synchronized; 100 sweeps |
//!
//! Kernel bounds (`data: &mut [f32; n]`) are checked before every launch and node update; the
//! rows `...: bounds vs none` measure that cost in the same run: the `generated` column is the
//! pipeline (or runtime kernel) declaring bounds, the `runtime` column the same without them,
//! so `generated/runtime` is the cost of the checks (1.000: none measurable).
//!
//! Each case runs once to warm up, then `REPS` times with the three variants interleaved (each
//! round starting one variant later, so none always runs first); the table shows medians of host-clock times around enqueue + synchronize, per step, node or
//! update, and the ratios generated/runtime and runtime/raw. Without a GPU it says so and exits
//! successfully. `cargo bench -p tests --bench pipeline`; on the GPU machine
//! `bash .gpu/run bench pipeline`. Results also go to `target/bench/pipeline.json`.

#[path = "../../benches/raw_driver.rs"]
mod raw_driver;

use std::ffi::c_void;
use std::time::{Duration, Instant};

use gpu_pipeline::sys;
use gpu_pipeline::{
    Bound, Bounds, CaptureMode, Context, DeviceBuffer, Event, EventFlags, LaunchConfig, Module,
    Stream, TypedKernel, gpu_pipeline,
};
use raw_driver::{Driver, check as ok};

const STEPS: usize = 10_000;
const REPLAYS: usize = 1_000;
const CHAIN: usize = 100;
const SWEEPS: usize = 100;
const REPS: usize = 7;
/// Whole-graph updates per sample of the `set scalar` row.
const SET_BATCHES: usize = 20;

type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;
type AddScalar = (u32, f32, &'static mut [f32]);
type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);

gpu_pipeline! {
    /// One empty kernel per step.
    pipeline Empty {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn empty();
        }
        stage only on main { launch k::empty() grid 1u32 block 1u32; }
    }
}

/// The cross-stream step, with the kernels' signatures given: once with bounds, once without.
macro_rules! cross_stream_pipeline {
    ($name:ident, ($($add:tt)*), ($($saxpy:tt)*)) => {
        gpu_pipeline! {
            /// A kernel on `a` writes `x`; a kernel on `b` reads it: one event each way per step.
            pipeline $name {
                streams { a, b }
                unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
                    fn add_scalar($($add)*);
                    fn saxpy($($saxpy)*);
                }
                params { n: u32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
                stage first on a { launch k::add_scalar(n, 1.0f32, x) grid 1u32 block 32u32; }
                stage second on b { launch k::saxpy(n, 1.0f32, x, y) grid 1u32 block 32u32; }
            }
        }
    };
}

cross_stream_pipeline!(
    CrossStream,
    (n: u32, value: f32, data: &mut [f32; n]),
    (n: u32, a: f32, x: &[f32; n], y: &mut [f32; n])
);
cross_stream_pipeline!(
    CrossStreamUnbounded,
    (n: u32, value: f32, data: &mut [f32; unbounded]),
    (n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded])
);

/// A stage of `CHAIN` launches of `add_scalar` on one buffer, with its bound (`Chain`) and
/// without (`ChainUnbounded`).
macro_rules! chain_pipeline {
    ($($i:literal)*) => {
        chain_pipeline!(@ Chain, (n: u32, value: f32, data: &mut [f32; n]), $($i)*);
        chain_pipeline!(@ ChainUnbounded, (n: u32, value: f32, data: &mut [f32; unbounded]), $($i)*);
    };
    (@ $name:ident, ($($signature:tt)*), $($i:literal)*) => {
        gpu_pipeline! {
            /// 100 dependent kernels on one stream: the step a graph replays.
            pipeline $name {
                streams { main }
                unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
                    fn add_scalar($($signature)*);
                }
                params { n: u32, value: f32, data: &mut DeviceBuffer<f32> }
                // `$i` only makes each repetition distinct; the grid is always one block.
                stage chain on main { $( launch k::add_scalar(n, value, data) grid 1u32 + 0 * $i block 32u32; )* }
            }
        }
    };
}

gpu_pipeline! {
    /// One sweep `y += x` on one stream: jacobiCudaGraphs' method 1 records it again every
    /// sweep with the grids exchanged.
    pipeline Sweep {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { n: u32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage sweep on main { launch k::saxpy(n, 1.0f32, x, y) grid 1u32 block 32u32; }
    }
}

chain_pipeline!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33
    34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
    64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93
    94 95 96 97 98 99
);

/// Driver entry points for the raw baseline, straight from the library.
struct Raw {
    launch_kernel: sys::PFN_cuLaunchKernel,
    write_value_64: sys::PFN_cuStreamWriteValue64,
    event_record: sys::PFN_cuEventRecord,
    wait_event: sys::PFN_cuStreamWaitEvent,
    synchronize: sys::PFN_cuStreamSynchronize,
    begin_capture: sys::PFN_cuStreamBeginCapture,
    end_capture: sys::PFN_cuStreamEndCapture,
    instantiate: sys::PFN_cuGraphInstantiateWithFlags,
    graph_launch: sys::PFN_cuGraphLaunch,
    exec_destroy: sys::PFN_cuGraphExecDestroy,
    exec_update: sys::PFN_cuGraphExecUpdate,
    graph_destroy: sys::PFN_cuGraphDestroy,
    get_nodes: sys::PFN_cuGraphGetNodes,
    set_params: sys::PFN_cuGraphExecKernelNodeSetParams,
    /// The same entry point as `cuGetProcAddress` resolves it (what the runtime calls).
    set_params_resolved: sys::PFN_cuGraphExecKernelNodeSetParams,
    _driver: Driver,
}

impl Raw {
    /// `cuLaunchKernel` of `function` as one block of `block` threads on `stream`, with
    /// `params` (null for a kernel without parameters).
    ///
    /// # Safety
    /// A live function and stream of one context, and `params` matching the kernel's
    /// signature, valid for the call.
    unsafe fn launch_block(
        &self,
        function: sys::CUfunction,
        block: u32,
        stream: sys::CUstream,
        params: *mut *mut c_void,
    ) -> sys::CUresult {
        // SAFETY: the caller's promise.
        unsafe {
            (self.launch_kernel)(
                function,
                1,
                1,
                1,
                block,
                1,
                1,
                0,
                stream,
                params,
                std::ptr::null_mut(),
            )
        }
    }

    fn open() -> BoxResult<Raw> {
        let driver = Driver::open()?;
        // SAFETY: each exported symbol has the signature `sys` declares for the named
        // variant (the `_v2` exports are the CUDA 12 ABI the runtime uses too).
        unsafe {
            Ok(Raw {
                launch_kernel: driver.get(b"cuLaunchKernel\0")?,
                write_value_64: driver.get(b"cuStreamWriteValue64_v2\0")?,
                event_record: driver.get(b"cuEventRecord\0")?,
                wait_event: driver.get(b"cuStreamWaitEvent\0")?,
                synchronize: driver.get(b"cuStreamSynchronize\0")?,
                begin_capture: driver.get(b"cuStreamBeginCapture_v2\0")?,
                end_capture: driver.get(b"cuStreamEndCapture\0")?,
                instantiate: driver.get(b"cuGraphInstantiateWithFlags\0")?,
                graph_launch: driver.get(b"cuGraphLaunch\0")?,
                exec_destroy: driver.get(b"cuGraphExecDestroy\0")?,
                exec_update: driver.get(b"cuGraphExecUpdate_v2\0")?,
                graph_destroy: driver.get(b"cuGraphDestroy\0")?,
                get_nodes: driver.get(b"cuGraphGetNodes\0")?,
                set_params: driver.get(b"cuGraphExecKernelNodeSetParams_v2\0")?,
                set_params_resolved: resolve(&driver, c"cuGraphExecKernelNodeSetParams")?,
                _driver: driver,
            })
        }
    }
}

/// `symbol` as `cuGetProcAddress_v2` gives it for the CUDA 12.0 ABI, the way the runtime's
/// driver table resolves its entry points.
///
/// # Safety
/// `T` must be the function-pointer type of `symbol`'s 12.0 ABI.
unsafe fn resolve<T: Copy>(driver: &Driver, symbol: &std::ffi::CStr) -> BoxResult<T> {
    // SAFETY: the exported symbol has this signature (sys documents it).
    let get: sys::PFN_cuGetProcAddress_v2 = unsafe { driver.get(b"cuGetProcAddress_v2\0")? };
    let (mut pfn, mut status) = (std::ptr::null_mut(), 0);
    // SAFETY: a NUL-terminated name and valid out-pointers.
    let code = unsafe { get(symbol.as_ptr(), &mut pfn, 12000, 0, &mut status) };
    ok(code, "cuGetProcAddress_v2")?;
    if pfn.is_null() {
        return Err(format!("cuGetProcAddress found no {symbol:?} (status {status})").into());
    }
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: a non-null function pointer of the type the caller names.
    Ok(unsafe { std::mem::transmute_copy(&pfn) })
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// One row: the three variants' median time per `unit`.
struct Row {
    case: &'static str,
    unit: &'static str,
    generated: f64,
    runtime: f64,
    raw: f64,
}

/// Warms each variant (0 generated, 1 runtime, 2 raw) up, then runs them `REPS` times
/// interleaved, each round starting one variant later; returns µs per unit. One closure, since the variants share buffers.
fn measure(per: usize, f: &mut dyn FnMut(usize) -> BoxResult<()>) -> BoxResult<[f64; 3]> {
    for variant in 0..3 {
        f(variant)?;
    }
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for rep in 0..REPS {
        // Each round starts one variant later, so none always runs first.
        for k in 0..3 {
            let variant = (rep + k) % 3;
            let start = Instant::now();
            f(variant)?;
            samples[variant].push(start.elapsed());
        }
    }
    let us = |s: Vec<Duration>| median(s).as_secs_f64() * 1e6 / per as f64;
    let [a, b, c] = samples;
    Ok([us(a), us(b), us(c)])
}

/// The raw side of the `set scalar` rows: every node of `nodes` set, through `set`, to launch
/// `function` on one block of 32 threads with the arguments `(n, value, ptr)`.
///
/// # Safety
///
/// `exec` is a live executable graph, `nodes` kernel nodes of its source graph that launch
/// `function`, a kernel taking `(unsigned, float, float*)` that reads and writes at most `n`
/// floats from `ptr`, a live allocation of at least that many.
unsafe fn raw_set_all(
    set: sys::PFN_cuGraphExecKernelNodeSetParams,
    exec: sys::CUgraphExec,
    nodes: &[sys::CUgraphNode],
    function: sys::CUfunction,
    (mut n, mut value, mut ptr): (u32, f32, u64),
) -> BoxResult<()> {
    let mut p: [*mut c_void; 3] = [
        (&raw mut n).cast(),
        (&raw mut value).cast(),
        (&raw mut ptr).cast(),
    ];
    let params = sys::CUDA_KERNEL_NODE_PARAMS {
        func: function,
        gridDimX: 1,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 32,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: p.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    };
    for &node in nodes {
        // SAFETY: the caller's promise; the parameters outlive the call (the driver copies
        // them).
        let code = unsafe { set(exec, node, &params) };
        ok(code, "cuGraphExecKernelNodeSetParams")?;
    }
    Ok(())
}

fn run(ctx: &Context) -> BoxResult<Vec<Row>> {
    let raw = Raw::open()?;
    let module = Module::load_ptx(ctx, include_str!("../../runtime/kernels/test_kernels.ptx"))?;
    // SAFETY: the test kernels' real signatures (runtime/kernels/test_kernels.cu).
    let empty: TypedKernel<()> = unsafe { module.function("empty")?.typed()? };
    // `add_scalar` indexes `data` below `n`; `saxpy` indexes `x` and `y` below `n`.
    let add_bounds = Bounds::new().buffer(2, Bound::param(0));
    let saxpy_bounds = Bounds::new()
        .buffer(2, Bound::param(0))
        .buffer(3, Bound::param(0));
    // SAFETY: as above, and each kernel indexes its buffers only below `n` (`if (i < n)`).
    let add: TypedKernel<AddScalar> = unsafe {
        module
            .function("add_scalar")?
            .typed_with_bounds(add_bounds)?
    };
    // SAFETY: as above.
    let saxpy: TypedKernel<Saxpy> =
        unsafe { module.function("saxpy")?.typed_with_bounds(saxpy_bounds)? };
    // The same kernels without bounds, for the rows that measure the checks' cost.
    // SAFETY: as above; every launch below passes `n` = the buffers' length.
    let add_unbounded: TypedKernel<AddScalar> = unsafe { module.function("add_scalar")?.typed()? };
    // SAFETY: as above.
    let saxpy_unbounded: TypedKernel<Saxpy> = unsafe { module.function("saxpy")?.typed()? };
    let mut rows = Vec::new();

    // 1. One empty kernel per step.
    {
        let mut pipeline = Empty::new(ctx)?;
        // Like for like: the hand-written variants do not track faults either.
        pipeline.set_fault_tracking(false);
        let mut tracked = Empty::new(ctx)?;
        tracked.set_fault_tracking(true);
        let stream = Stream::non_blocking(ctx)?;
        let one = LaunchConfig::new(1u32, 1u32);
        let function = empty.kernel().handle().ok_or("a CUDA context")?;
        let raw_stream = stream.handle().ok_or("a CUDA context")?;
        let [g, r, w] = measure(STEPS, &mut |variant| match variant {
            0 => Ok(pipeline.run_steps(EmptyParams {}, STEPS)?.wait()?),
            1 => {
                for _ in 0..STEPS {
                    empty.launch(&stream, one, ())?;
                }
                Ok(stream.synchronize()?)
            }
            _ => {
                for _ in 0..STEPS {
                    // SAFETY: a live function and stream; no parameters.
                    let code =
                        unsafe { raw.launch_block(function, 1, raw_stream, std::ptr::null_mut()) };
                    ok(code, "cuLaunchKernel")?;
                }
                // SAFETY: a live stream.
                let code = unsafe { (raw.synchronize)(raw_stream) };
                ok(code, "cuStreamSynchronize")
            }
        })?;
        rows.push(Row {
            case: "eager 1 kernel",
            unit: "µs/step",
            generated: g,
            runtime: r,
            raw: w,
        });
        // The same step with fault tracking on (one more memory operation per stage), against
        // the untracked default; the raw column is unused here.
        let [g, r, _] = measure(STEPS, &mut |variant| match variant {
            0 => Ok(tracked.run_steps(EmptyParams {}, STEPS)?.wait()?),
            1 => Ok(pipeline.run_steps(EmptyParams {}, STEPS)?.wait()?),
            _ => Ok(()),
        })?;
        rows.push(Row {
            case: "eager 1 kernel: tracked vs untracked",
            unit: "µs/step",
            generated: g,
            runtime: r,
            raw: r,
        });
        // The driver's own price of a mark: the raw launch followed by the write a tracked
        // step enqueues (`cuStreamWriteValue64` to a mapped host word), against the raw
        // launch alone. Its ratio is the floor of the row above.
        let word = gpu_pipeline::FlagCell::new(ctx, 0u64)?;
        let address = word.device_address().ok_or("a CUDA context")?;
        let raw_launch = |marked: bool| -> BoxResult<()> {
            for step in 0..STEPS {
                // SAFETY: a live function and stream; no parameters.
                let code =
                    unsafe { raw.launch_block(function, 1, raw_stream, std::ptr::null_mut()) };
                ok(code, "cuLaunchKernel")?;
                if marked {
                    // SAFETY: a live stream and the device address of a mapped word that
                    // outlives the work (synchronized below, `word` dropped after).
                    let code = unsafe { (raw.write_value_64)(raw_stream, address, step as u64, 0) };
                    ok(code, "cuStreamWriteValue64")?;
                }
            }
            // SAFETY: a live stream.
            ok(
                unsafe { (raw.synchronize)(raw_stream) },
                "cuStreamSynchronize",
            )
        };
        let [g, r, _] = measure(STEPS, &mut |variant| match variant {
            0 => raw_launch(true),
            1 => raw_launch(false),
            _ => Ok(()),
        })?;
        rows.push(Row {
            case: "raw: launch + mark vs launch",
            unit: "µs/step",
            generated: g,
            runtime: r,
            raw: r,
        });
        drop(word);
    }

    // 2. The cross-stream step.
    {
        let mut pipeline = CrossStream::new(ctx)?;
        pipeline.set_fault_tracking(false);
        let (a, b) = (Stream::non_blocking(ctx)?, Stream::non_blocking(ctx)?);
        let (ea, eb) = (
            Event::with_flags(ctx, EventFlags::ORDERING)?,
            Event::with_flags(ctx, EventFlags::ORDERING)?,
        );
        let mut x = DeviceBuffer::<f32>::zeros(&a, 32)?;
        let mut y = DeviceBuffer::<f32>::zeros(&a, 32)?;
        a.synchronize()?;
        let cfg = LaunchConfig::new(1u32, 32u32);
        let (fa, fb) = (
            add.kernel().handle().ok_or("a CUDA context")?,
            saxpy.kernel().handle().ok_or("a CUDA context")?,
        );
        let (ra, rb, rea, reb) = (
            a.handle().ok_or("a CUDA context")?,
            b.handle().ok_or("a CUDA context")?,
            ea.handle().ok_or("a CUDA context")?,
            eb.handle().ok_or("a CUDA context")?,
        );
        let (mut n, mut one) = (32_u32, 1.0_f32);
        let (mut px, mut py) = (
            x.device_ptr().ok_or("a CUDA context")?,
            y.device_ptr().ok_or("a CUDA context")?,
        );
        let [g, r, w] = measure(STEPS, &mut |variant| match variant {
            0 => Ok(pipeline
                .run_steps(
                    CrossStreamParams {
                        n: 32,
                        x: &mut x,
                        y: &mut y,
                    },
                    STEPS,
                )?
                .wait()?),
            1 => {
                for _ in 0..STEPS {
                    add.launch(&a, cfg, (32u32, 1.0f32, &mut x))?;
                    a.record_into(&ea)?;
                    b.wait_event(&ea)?;
                    saxpy.launch(&b, cfg, (32u32, 1.0f32, &x, &mut y))?;
                    b.record_into(&eb)?;
                    a.wait_event(&eb)?;
                }
                Ok(a.synchronize()?)
            }
            _ => {
                let mut pa: [*mut c_void; 3] = [
                    (&raw mut n).cast(),
                    (&raw mut one).cast(),
                    (&raw mut px).cast(),
                ];
                let mut pb: [*mut c_void; 4] = [
                    (&raw mut n).cast(),
                    (&raw mut one).cast(),
                    (&raw mut px).cast(),
                    (&raw mut py).cast(),
                ];
                for _ in 0..STEPS {
                    // SAFETY: live handles of one context; the parameter arrays match the
                    // kernels' signatures and outlive each call.
                    unsafe {
                        ok(
                            raw.launch_block(fa, 32, ra, pa.as_mut_ptr()),
                            "cuLaunchKernel",
                        )?;
                        ok((raw.event_record)(rea, ra), "cuEventRecord")?;
                        ok((raw.wait_event)(rb, rea, 0), "cuStreamWaitEvent")?;
                        ok(
                            raw.launch_block(fb, 32, rb, pb.as_mut_ptr()),
                            "cuLaunchKernel",
                        )?;
                        ok((raw.event_record)(reb, rb), "cuEventRecord")?;
                        ok((raw.wait_event)(ra, reb, 0), "cuStreamWaitEvent")?;
                    }
                }
                // SAFETY: a live stream.
                ok(unsafe { (raw.synchronize)(ra) }, "cuStreamSynchronize")
            }
        })?;
        rows.push(Row {
            case: "eager cross-stream",
            unit: "µs/step",
            generated: g,
            runtime: r,
            raw: w,
        });

        // The bounds' cost: the same step with and without them, generated and by hand.
        let mut unbounded = CrossStreamUnbounded::new(ctx)?;
        unbounded.set_fault_tracking(false);
        let [g, r, _] = measure(STEPS, &mut |variant| match variant {
            0 => Ok(pipeline
                .run_steps(
                    CrossStreamParams {
                        n: 32,
                        x: &mut x,
                        y: &mut y,
                    },
                    STEPS,
                )?
                .wait()?),
            1 => Ok(unbounded
                .run_steps(
                    CrossStreamUnboundedParams {
                        n: 32,
                        x: &mut x,
                        y: &mut y,
                    },
                    STEPS,
                )?
                .wait()?),
            _ => Ok(()),
        })?;
        rows.push(Row {
            case: "eager cross-stream: bounds vs none",
            unit: "µs/step",
            generated: g,
            runtime: r,
            raw: r,
        });
        let [g, r, _] = measure(STEPS, &mut |variant| {
            let (add, saxpy) = match variant {
                0 => (&add, &saxpy),
                1 => (&add_unbounded, &saxpy_unbounded),
                _ => return Ok(()),
            };
            for _ in 0..STEPS {
                add.launch(&a, cfg, (32u32, 1.0f32, &mut x))?;
                a.record_into(&ea)?;
                b.wait_event(&ea)?;
                saxpy.launch(&b, cfg, (32u32, 1.0f32, &x, &mut y))?;
                b.record_into(&eb)?;
                a.wait_event(&eb)?;
            }
            Ok(a.synchronize()?)
        })?;
        rows.push(Row {
            case: "eager cross-stream, runtime: bounds vs none",
            unit: "µs/step",
            generated: g,
            runtime: r,
            raw: r,
        });
    }

    // 3-5. A 100-kernel step: capture to runnable, replay, scalar update.
    {
        let mut pipeline = Chain::new(ctx)?;
        pipeline.set_fault_tracking(false);
        let stream = Stream::non_blocking(ctx)?;
        let mut data = DeviceBuffer::<f32>::zeros(&stream, 32)?;
        stream.synchronize()?;
        let cfg = LaunchConfig::new(1u32, 32u32);
        let function = add.kernel().handle().ok_or("a CUDA context")?;
        let raw_stream = stream.handle().ok_or("a CUDA context")?;
        let (mut n, mut value, mut ptr) =
            (32_u32, 1.0_f32, data.device_ptr().ok_or("a CUDA context")?);

        let raw_capture = |raw: &Raw,
                           n: &mut u32,
                           value: &mut f32,
                           ptr: &mut u64|
         -> BoxResult<(sys::CUgraph, sys::CUgraphExec)> {
            let mut p: [*mut c_void; 3] = [
                (n as *mut u32).cast(),
                (value as *mut f32).cast(),
                (ptr as *mut u64).cast(),
            ];
            let (mut graph, mut exec) = (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: a live stream and function; `p` matches add_scalar and outlives the
            // calls; the graph and exec are destroyed by the caller.
            unsafe {
                ok(
                    (raw.begin_capture)(raw_stream, sys::CUstreamCaptureMode::THREAD_LOCAL),
                    "cuStreamBeginCapture",
                )?;
                for _ in 0..CHAIN {
                    ok(
                        raw.launch_block(function, 32, raw_stream, p.as_mut_ptr()),
                        "cuLaunchKernel",
                    )?;
                }
                ok(
                    (raw.end_capture)(raw_stream, &mut graph),
                    "cuStreamEndCapture",
                )?;
                ok(
                    (raw.instantiate)(&mut exec, graph, 0),
                    "cuGraphInstantiateWithFlags",
                )?;
            }
            Ok((graph, exec))
        };
        let raw_destroy = |raw: &Raw, graph: sys::CUgraph, exec: sys::CUgraphExec| {
            // SAFETY: owned handles, no launch in flight (callers synchronize first).
            unsafe {
                (raw.exec_destroy)(exec);
                (raw.graph_destroy)(graph);
            }
        };

        let [g, r, w] = measure(1, &mut |variant| match variant {
            0 => {
                drop(pipeline.capture(ChainParams {
                    n: 32,
                    value: 1.0,
                    data: &mut data,
                })?);
                Ok(())
            }
            1 => {
                let graph = stream.capture(CaptureMode::ThreadLocal, |s| {
                    for _ in 0..CHAIN {
                        add.launch(s, cfg, (32u32, 1.0f32, &mut data))?;
                    }
                    Ok(())
                })?;
                drop(graph.instantiate()?);
                Ok(())
            }
            _ => {
                let (graph, exec) = raw_capture(&raw, &mut n, &mut value, &mut ptr)?;
                raw_destroy(&raw, graph, exec);
                Ok(())
            }
        })?;
        rows.push(Row {
            case: "capture 100 kernels",
            unit: "µs/graph",
            generated: g,
            runtime: r,
            raw: w,
        });
        let mut unbounded = ChainUnbounded::new(ctx)?;
        unbounded.set_fault_tracking(false);
        let [g, r, _] = measure(1, &mut |variant| {
            match variant {
                0 => drop(pipeline.capture(ChainParams {
                    n: 32,
                    value: 1.0,
                    data: &mut data,
                })?),
                1 => drop(unbounded.capture(ChainUnboundedParams {
                    n: 32,
                    value: 1.0,
                    data: &mut data,
                })?),
                _ => {}
            }
            Ok(())
        })?;
        rows.push(Row {
            case: "capture 100 kernels: bounds vs none",
            unit: "µs/graph",
            generated: g,
            runtime: r,
            raw: r,
        });

        // Replay: the same three graphs, each launched REPLAYS times.
        let mut generated = pipeline.capture(ChainParams {
            n: 32,
            value: 1.0,
            data: &mut data,
        })?;
        let hand = {
            // The hand-written graph uses its own buffer: `data` is borrowed by `generated`.
            let mut other = DeviceBuffer::<f32>::zeros(&stream, 32)?;
            let graph = stream.capture(CaptureMode::ThreadLocal, |s| {
                for _ in 0..CHAIN {
                    add.launch(s, cfg, (32u32, 1.0f32, &mut other))?;
                }
                Ok(())
            })?;
            (graph.instantiate()?, graph, other)
        };
        let (raw_graph, raw_exec) = raw_capture(&raw, &mut n, &mut value, &mut ptr)?;
        let [g, r, w] = measure(REPLAYS * CHAIN, &mut |variant| match variant {
            0 => {
                for _ in 0..REPLAYS {
                    generated.launch()?;
                }
                Ok(generated.synchronize()?)
            }
            1 => {
                for _ in 0..REPLAYS {
                    hand.0.launch(&stream)?;
                }
                Ok(stream.synchronize()?)
            }
            _ => {
                for _ in 0..REPLAYS {
                    // SAFETY: a live executable graph and stream.
                    let code = unsafe { (raw.graph_launch)(raw_exec, raw_stream) };
                    ok(code, "cuGraphLaunch")?;
                }
                // SAFETY: a live stream.
                let code = unsafe { (raw.synchronize)(raw_stream) };
                ok(code, "cuStreamSynchronize")
            }
        })?;
        rows.push(Row {
            case: "replay 100 kernels",
            unit: "µs/node",
            generated: g,
            runtime: r,
            raw: w,
        });

        // The same replay with fault tracking on (a reset and a mark node around the 100
        // kernels), against the untracked graph; the raw column is unused here.
        {
            let mut tracked = Chain::new(ctx)?;
            tracked.set_fault_tracking(true);
            let mut tracked_data = DeviceBuffer::<f32>::zeros(&stream, 32)?;
            stream.synchronize()?;
            let mut tracked = tracked.capture(ChainParams {
                n: 32,
                value: 1.0,
                data: &mut tracked_data,
            })?;
            let [t, u, _] = measure(REPLAYS * CHAIN, &mut |variant| match variant {
                0 => {
                    for _ in 0..REPLAYS {
                        tracked.launch()?;
                    }
                    Ok(tracked.synchronize()?)
                }
                1 => {
                    for _ in 0..REPLAYS {
                        generated.launch()?;
                    }
                    Ok(generated.synchronize()?)
                }
                _ => Ok(()),
            })?;
            rows.push(Row {
                case: "replay 100 kernels: tracked vs untracked",
                unit: "µs/node",
                generated: t,
                runtime: u,
                raw: u,
            });
        }

        // Scalar update of all 100 kernel nodes.
        let mut hand_exec = hand.0;
        let hand_nodes = hand.1.kernel_nodes()?;
        let mut hand_data = hand.2;
        let mut raw_nodes = vec![std::ptr::null_mut(); CHAIN + 1];
        let mut count = raw_nodes.len();
        // SAFETY: a live graph and an array of `count` slots.
        let code = unsafe { (raw.get_nodes)(raw_graph, raw_nodes.as_mut_ptr(), &mut count) };
        ok(code, "cuGraphGetNodes")?;
        raw_nodes.truncate(count);
        let mut v = 1.0_f32;
        // Each sample is SET_BATCHES updates of the whole graph: one batch (about 30 µs) is
        // short enough for the host's scheduling to move it by several times.
        let mut one_batch = |variant: usize| -> BoxResult<()> {
            match variant {
                0 => {
                    v += 1.0;
                    generated.set_value(v)?;
                    Ok(generated.apply_updates()?)
                }
                1 => {
                    v += 1.0;
                    let mut updates = hand_exec.kernel_updates()?;
                    for node in &hand_nodes {
                        updates.set(node, &add, cfg, (32u32, v, &mut hand_data))?;
                    }
                    Ok(())
                }
                _ => {
                    value += 1.0;
                    // SAFETY: a live executable graph whose nodes launch `function`
                    // (`add_scalar`) on the 32 floats at `ptr`.
                    unsafe {
                        raw_set_all(
                            raw.set_params,
                            raw_exec,
                            &raw_nodes,
                            function,
                            (n, value, ptr),
                        )
                    }
                }
            }
        };
        let [g, r, w] = measure(CHAIN * SET_BATCHES, &mut |variant| {
            for _ in 0..SET_BATCHES {
                one_batch(variant)?;
            }
            Ok(())
        })?;
        // Diagnostic: the raw update through the entry point `cuGetProcAddress` returns
        // (the runtime's) against the `dlsym`'d `_v2` export, same parameters.
        let [a, b, _] = measure(CHAIN, &mut |variant| {
            let set = match variant {
                0 => raw.set_params_resolved,
                1 => raw.set_params,
                _ => return Ok(()),
            };
            value += 1.0;
            // SAFETY: as for the raw variant above.
            unsafe { raw_set_all(set, raw_exec, &raw_nodes, function, (n, value, ptr)) }
        })?;
        println!(
            "diagnostic: raw set scalar {a:.4} µs/node via cuGetProcAddress, {b:.4} via dlsym"
        );
        rows.push(Row {
            case: "set scalar",
            unit: "µs/node",
            generated: g,
            runtime: r,
            raw: w,
        });
        // Two scalars of every node changed, then applied: each node is still updated once.
        let [g, _, _] = measure(CHAIN, &mut |variant| {
            if variant == 0 {
                v += 1.0;
                generated.set_n(32)?;
                generated.set_value(v)?;
                generated.apply_updates()?;
            }
            Ok(())
        })?;
        rows.push(Row {
            case: "set 2 scalars, apply once",
            unit: "µs/node",
            generated: g,
            runtime: r,
            raw: w,
        });
        drop(generated);

        // `set_n`: `n` feeds the bound of every node, so each update is checked first.
        let mut bounded_data = DeviceBuffer::<f32>::zeros(&stream, 32)?;
        let mut unbounded_data = DeviceBuffer::<f32>::zeros(&stream, 32)?;
        stream.synchronize()?;
        let mut bounded = pipeline.capture(ChainParams {
            n: 32,
            value: 1.0,
            data: &mut bounded_data,
        })?;
        let mut unbounded = unbounded.capture(ChainUnboundedParams {
            n: 32,
            value: 1.0,
            data: &mut unbounded_data,
        })?;
        let mut step = 0_u32;
        let [g, r, _] = measure(CHAIN, &mut |variant| {
            // Alternates between two values that fit, so every call updates the nodes.
            step += 1;
            let n = 31 + step % 2;
            match variant {
                0 => {
                    bounded.set_n(n)?;
                    Ok(bounded.apply_updates()?)
                }
                1 => {
                    unbounded.set_n(n)?;
                    Ok(unbounded.apply_updates()?)
                }
                _ => Ok(()),
            }
        })?;
        rows.push(Row {
            case: "set n: bounds vs none",
            unit: "µs/node",
            generated: g,
            runtime: r,
            raw: r,
        });
        drop((bounded, unbounded));
        stream.synchronize()?;
        raw_destroy(&raw, raw_graph, raw_exec);
    }

    // 6. jacobiCudaGraphs' method 1: record again, update, launch, synchronize, per sweep.
    {
        let mut pipeline = Sweep::new(ctx)?;
        pipeline.set_fault_tracking(false);
        let stream = Stream::non_blocking(ctx)?;
        let grid = |stream: &Stream| DeviceBuffer::<f32>::zeros(stream, 32);
        let (mut x0, mut y0) = (grid(&stream)?, grid(&stream)?);
        let (mut x1, mut y1) = (grid(&stream)?, grid(&stream)?);
        let (x2, y2) = (grid(&stream)?, grid(&stream)?);
        stream.synchronize()?;
        let cfg = LaunchConfig::new(1u32, 32u32);
        let function = saxpy.kernel().handle().ok_or("a CUDA context")?;
        let raw_stream = stream.handle().ok_or("a CUDA context")?;
        let grids = [
            x2.device_ptr().ok_or("a CUDA context")?,
            y2.device_ptr().ok_or("a CUDA context")?,
        ];
        // One raw sweep's capture: `y += x` with the grids of parity `k`.
        let raw_record = |k: usize| -> BoxResult<sys::CUgraph> {
            let (mut n, mut a) = (32_u32, 1.0_f32);
            let (mut src, mut dst) = (grids[k % 2], grids[(k + 1) % 2]);
            let mut p: [*mut c_void; 4] = [
                (&mut n as *mut u32).cast(),
                (&mut a as *mut f32).cast(),
                (&mut src as *mut u64).cast(),
                (&mut dst as *mut u64).cast(),
            ];
            let mut graph = std::ptr::null_mut();
            // SAFETY: a live stream and function; `p` matches saxpy and outlives the calls;
            // the caller destroys the graph.
            unsafe {
                ok(
                    (raw.begin_capture)(raw_stream, sys::CUstreamCaptureMode::THREAD_LOCAL),
                    "cuStreamBeginCapture",
                )?;
                ok(
                    raw.launch_block(function, 32, raw_stream, p.as_mut_ptr()),
                    "cuLaunchKernel",
                )?;
                ok(
                    (raw.end_capture)(raw_stream, &mut graph),
                    "cuStreamEndCapture",
                )?;
            }
            Ok(graph)
        };
        let first = raw_record(0)?;
        let mut raw_exec = std::ptr::null_mut();
        // SAFETY: a live graph and a valid out-pointer.
        let code = unsafe { (raw.instantiate)(&mut raw_exec, first, 0) };
        ok(code, "cuGraphInstantiateWithFlags")?;
        let mut graph = pipeline.capture(SweepParams {
            n: 32,
            x: &mut x0,
            y: &mut y0,
        })?;
        let recorded = stream.capture(CaptureMode::ThreadLocal, |s| {
            saxpy.launch(s, cfg, (32u32, 1.0f32, &x1, &mut y1))
        })?;
        let mut exec = recorded.instantiate()?;
        drop(recorded);
        let [g, r, w] = measure(SWEEPS, &mut |variant| {
            match variant {
                0 => {
                    for _ in 0..SWEEPS {
                        let outcome =
                            graph.recapture_with(|p| std::mem::swap(&mut p.x, &mut p.y))?;
                        if !outcome.is_updated() {
                            return Err(format!("the sweep was not updated: {outcome:?}").into());
                        }
                        graph.launch()?;
                        graph.synchronize()?;
                    }
                }
                1 => {
                    for k in 0..SWEEPS {
                        let (src, dst) = if k % 2 == 0 {
                            (&x1, &mut y1)
                        } else {
                            (&y1, &mut x1)
                        };
                        let recorded = stream.capture(CaptureMode::ThreadLocal, |s| {
                            saxpy.launch(s, cfg, (32u32, 1.0f32, src, dst))
                        })?;
                        if !exec.try_update(&recorded)?.is_success() {
                            return Err("the runtime's update was refused".into());
                        }
                        exec.launch(&stream)?;
                        stream.synchronize()?;
                    }
                }
                _ => {
                    for k in 0..SWEEPS {
                        let recorded = raw_record(k)?;
                        let mut info = sys::CUgraphExecUpdateResultInfo {
                            result: sys::CUgraphExecUpdateResult::SUCCESS,
                            errorNode: std::ptr::null_mut(),
                            errorFromNode: std::ptr::null_mut(),
                        };
                        // SAFETY: a live executable graph and graph of one context, a live
                        // stream; the graph is destroyed after the launch that follows.
                        unsafe {
                            ok(
                                (raw.exec_update)(raw_exec, recorded, &mut info),
                                "cuGraphExecUpdate",
                            )?;
                            ok((raw.graph_launch)(raw_exec, raw_stream), "cuGraphLaunch")?;
                            ok((raw.synchronize)(raw_stream), "cuStreamSynchronize")?;
                            (raw.graph_destroy)(recorded);
                        }
                    }
                }
            }
            Ok(())
        })?;
        rows.push(Row {
            case: "recapture every sweep",
            unit: "µs/sweep",
            generated: g,
            runtime: r,
            raw: w,
        });
        drop((graph, exec));
        stream.synchronize()?;
        // SAFETY: owned handles, no launch in flight (synchronized above).
        unsafe {
            (raw.exec_destroy)(raw_exec);
            (raw.graph_destroy)(first);
        }
    }
    Ok(rows)
}

fn main() {
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("pipeline bench skipped: no CUDA device ({e})");
            return;
        }
    };
    let device = ctx.device().and_then(|d| d.name().ok()).unwrap_or_default();
    let rows = match run(&ctx) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("pipeline bench failed: {e}");
            std::process::exit(1);
        }
    };
    println!("\n{device}: medians of {REPS} runs after warm-up");
    println!("| case | unit | generated | runtime | raw | generated/runtime | runtime/raw |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    let mut json = Vec::new();
    for row in &rows {
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            row.case,
            row.unit,
            row.generated,
            row.runtime,
            row.raw,
            row.generated / row.runtime,
            row.runtime / row.raw
        );
        json.push(format!(
            "{{\"case\":\"{}\",\"unit\":\"{}\",\"generated\":{:.4},\"runtime\":{:.4},\"raw\":{:.4}}}",
            row.case, row.unit, row.generated, row.runtime, row.raw
        ));
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let json = format!(
        "{{\"device\":\"{device}\",\"rows\":[{}]}}\n",
        json.join(",")
    );
    if std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("pipeline.json"), json))
        .is_err()
    {
        eprintln!("could not write target/bench/pipeline.json");
    }
}
