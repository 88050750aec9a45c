//! Building graphs, and device loops against host loops, measured in the same run.
//!
//! - capture-to-runnable of a 100-kernel step (a chain of `add_scalar` launches on one
//!   buffer), from nothing to an executable graph: raw stream capture through the driver
//!   (`cuStreamBeginCapture`, 100 `cuLaunchKernel`, `cuStreamEndCapture`,
//!   `cuGraphInstantiateWithFlags`), the runtime's stream capture, the runtime's node-by-node
//!   build (`Graph::add_kernel_node`), and a generated pipeline's `capture` (built from the
//!   stage graph), with fault tracking off and on;
//! - a convergence loop of `ITERATIONS` iterations (one kernel lowers a residual by one): as a
//!   device `while` node built with the runtime, as a generated pipeline's replay (device
//!   loop), as the same pipeline's eager run (the host reads the residual back and decides
//!   after each iteration), and as a hand-written host loop through the runtime (launch, copy
//!   back, synchronize, compare). Per iteration;
//! - the raw, runtime and generated builds of the first group again, each split into its
//!   phases (building the graph, instantiating it, destroying both), means over
//!   `PHASE_GRAPHS` graphs: the driver's instantiation and destruction are the same for all
//!   three, so what the library adds shows in the build phase alone.
//!
//! Each case runs once to warm up, then `REPS` times, cases interleaved (each round starting
//! one case later, so no case always follows the same one); the table shows
//! medians and the ratio to the first row of its group. The raw C++ anchor of the device loop
//! is the lead's (`docs/PERFORMANCE.md`). Without a GPU it prints why and exits successfully.
//!
//! Run with `cargo bench -p gpu-pipeline --bench graph_build`.

#[path = "common/chain.rs"]
mod chain;
#[path = "../../benches/raw_driver.rs"]
mod raw_driver;

use std::ffi::c_void;
use std::time::{Duration, Instant};

use chain::{Chain, ChainParams};
use gpu_pipeline::sys;
use gpu_pipeline::{
    CaptureMode, Comparison, Condition, Context, DeviceBuffer, Graph, LaunchConfig, Module,
    PinnedBuffer, Stream, TypedKernel, gpu_pipeline,
};
use raw_driver::{Driver, check};

const PTX: &str = include_str!("../kernels/test_kernels.ptx");
const CHAIN: usize = 100;
const BUILDS: u32 = 20;
const ITERATIONS: u32 = 2_000;
const REPS: usize = 7;
/// Graphs per case of the phases table, after `PHASE_WARMUP` untimed ones.
const PHASE_GRAPHS: usize = 200;
const PHASE_WARMUP: usize = 20;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;
type AddScalar = (u32, f32, &'static mut [f32]);
/// A named case of a group, timed together.
type Case<'a> = (&'static str, Box<dyn FnMut() -> Result<()> + 'a>);

gpu_pipeline! {
    /// Lowers `residual` by one per iteration while it is above 0.5.
    pipeline Converge {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { start: f32, limit: u32, residual: &mut DeviceBuffer<f32> }
        stage solve on main {
            fill residual = start;
            while residual > 0.5f32 max limit {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
            }
        }
    }
}

/// The entry points of the raw capture baseline, straight from the library.
struct Raw {
    begin_capture: sys::PFN_cuStreamBeginCapture,
    end_capture: sys::PFN_cuStreamEndCapture,
    launch_kernel: sys::PFN_cuLaunchKernel,
    instantiate: sys::PFN_cuGraphInstantiateWithFlags,
    exec_destroy: sys::PFN_cuGraphExecDestroy,
    graph_destroy: sys::PFN_cuGraphDestroy,
    graph_create: sys::PFN_cuGraphCreate,
    add_kernel_node: sys::PFN_cuGraphAddKernelNode,
    _driver: Driver,
}

impl Raw {
    fn open() -> Result<Raw> {
        let driver = Driver::open()?;
        // SAFETY: these exported symbols have the signatures `sys` declares for them
        // (`cuStreamBeginCapture_v2` is the form with a mode).
        unsafe {
            Ok(Raw {
                begin_capture: driver.get(b"cuStreamBeginCapture_v2\0")?,
                end_capture: driver.get(b"cuStreamEndCapture\0")?,
                launch_kernel: driver.get(b"cuLaunchKernel\0")?,
                instantiate: driver.get(b"cuGraphInstantiateWithFlags\0")?,
                exec_destroy: driver.get(b"cuGraphExecDestroy\0")?,
                graph_destroy: driver.get(b"cuGraphDestroy\0")?,
                graph_create: driver.get(b"cuGraphCreate\0")?,
                add_kernel_node: driver.get(b"cuGraphAddKernelNode_v2\0")?,
                _driver: driver,
            })
        }
    }

    /// Captures `CHAIN` launches of `function` with `params` on `stream`, instantiates the
    /// graph, and destroys both.
    fn capture_to_runnable(
        &self,
        function: sys::CUfunction,
        stream: sys::CUstream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: a live stream of the current context, not capturing.
        let code = unsafe { (self.begin_capture)(stream, sys::CUstreamCaptureMode::THREAD_LOCAL) };
        check(code, "cuStreamBeginCapture")?;
        for _ in 0..CHAIN {
            // SAFETY: a live function and capturing stream; `params` matches the kernel's
            // parameters and outlives the call.
            let code = unsafe {
                (self.launch_kernel)(
                    function,
                    1,
                    1,
                    1,
                    32,
                    1,
                    1,
                    0,
                    stream,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
            check(code, "cuLaunchKernel")?;
        }
        let mut graph = std::ptr::null_mut();
        // SAFETY: the stream began the capture above; a valid out-pointer.
        let code = unsafe { (self.end_capture)(stream, &mut graph) };
        check(code, "cuStreamEndCapture")?;
        let mut exec = std::ptr::null_mut();
        // SAFETY: the graph just captured and a valid out-pointer.
        let code = unsafe { (self.instantiate)(&mut exec, graph, 0) };
        check(code, "cuGraphInstantiateWithFlags")?;
        // SAFETY: never launched, owned here, destroyed once.
        unsafe {
            check((self.exec_destroy)(exec), "cuGraphExecDestroy")?;
            check((self.graph_destroy)(graph), "cuGraphDestroy")
        }
    }
}

impl Raw {
    /// Builds the same chain node by node (`cuGraphAddKernelNode`, each node after the one
    /// before), instantiates it, and destroys both: the driver's floor for a built graph.
    fn build_to_runnable(
        &self,
        function: sys::CUfunction,
        params: &mut [*mut c_void],
    ) -> Result<Phases> {
        let start = Instant::now();
        let mut graph = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; flags must be 0.
        let code = unsafe { (self.graph_create)(&mut graph, 0) };
        check(code, "cuGraphCreate")?;
        let node_params = sys::CUDA_KERNEL_NODE_PARAMS {
            func: function,
            gridDimX: 1,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: 32,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            kernelParams: params.as_mut_ptr(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        };
        let mut last: sys::CUgraphNode = std::ptr::null_mut();
        for index in 0..CHAIN {
            let mut node = std::ptr::null_mut();
            let deps = usize::from(index > 0);
            // SAFETY: a live graph, `deps` (0 or 1) nodes of it at `&last`, and parameters
            // matching the kernel that the driver copies.
            let code =
                unsafe { (self.add_kernel_node)(&mut node, graph, &last, deps, &node_params) };
            check(code, "cuGraphAddKernelNode")?;
            last = node;
        }
        let built = Instant::now();
        let mut exec = std::ptr::null_mut();
        // SAFETY: the graph just built and a valid out-pointer.
        let code = unsafe { (self.instantiate)(&mut exec, graph, 0) };
        check(code, "cuGraphInstantiateWithFlags")?;
        let instantiated = Instant::now();
        // SAFETY: never launched, owned here, destroyed once.
        unsafe {
            check((self.exec_destroy)(exec), "cuGraphExecDestroy")?;
            check((self.graph_destroy)(graph), "cuGraphDestroy")?;
        }
        Ok(phases_until_now(start, built, instantiated))
    }
}

/// Calls `f` with the driver's parameter array for one `add_scalar(32, 1.0, ptr)` launch of
/// the chain, as the raw builds pass it (the values live on this frame during `f`).
fn with_chain_params<R>(ptr: sys::CUdeviceptr, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
    let (mut n, mut value, mut p) = (32u32, 1.0f32, ptr);
    let mut params = [
        (&raw mut n).cast::<c_void>(),
        (&raw mut value).cast::<c_void>(),
        (&raw mut p).cast::<c_void>(),
    ];
    f(&mut params)
}

/// Where one capture-to-runnable spent its time: building the graph (for a generated
/// pipeline, also preparing and planning the step), instantiating it, and destroying both.
type Phases = [Duration; 3];

/// The [`Phases`] of a build that started at `start`, was built at `built` and instantiated
/// at `instantiated`, destroyed now.
fn phases_until_now(start: Instant, built: Instant, instantiated: Instant) -> Phases {
    [built - start, instantiated - built, instantiated.elapsed()]
}

/// One row: a case and its median time per unit.
struct Row {
    group: &'static str,
    case: &'static str,
    median: Duration,
    per: u32,
}

/// Runs every case once to warm up, then `REPS` times interleaved; medians.
fn measure(cases: &mut [Case<'_>]) -> Result<Vec<Duration>> {
    for (_, case) in cases.iter_mut() {
        case()?;
    }
    let mut times = vec![Vec::new(); cases.len()];
    for rep in 0..REPS {
        // Each round starts one case later, so no case always follows the same one.
        for k in 0..cases.len() {
            let index = (rep + k) % cases.len();
            let start = Instant::now();
            (cases[index].1)()?;
            times[index].push(start.elapsed());
        }
    }
    Ok(times
        .into_iter()
        .map(|mut t| {
            t.sort();
            t[REPS / 2]
        })
        .collect())
}

fn builds(ctx: &Context, raw: &Raw, add_scalar: &TypedKernel<AddScalar>) -> Result<Vec<Row>> {
    let stream = Stream::non_blocking(ctx)?;
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32)?;
    stream.synchronize()?;
    let config = LaunchConfig::new(1u32, 32u32);
    let ptr = data.device_ptr().ok_or("a CUDA context")?;
    let function = add_scalar.kernel().handle().ok_or("a CUDA context")?;
    let raw_stream = stream.handle().ok_or("a CUDA context")?;
    let mut untracked = Chain::new(ctx)?;
    untracked.set_fault_tracking(false);
    let mut tracked = Chain::new(ctx)?;
    tracked.set_fault_tracking(true);
    let data_cell = std::cell::RefCell::new(&mut data);
    let mut cases: Vec<Case<'_>> = vec![
        (
            "raw stream capture (driver calls)",
            Box::new(|| {
                for _ in 0..BUILDS {
                    with_chain_params(ptr, |params| {
                        raw.capture_to_runnable(function, raw_stream, params)
                    })?;
                }
                Ok(())
            }),
        ),
        (
            "raw build (cuGraphAddKernelNode)",
            Box::new(|| {
                for _ in 0..BUILDS {
                    with_chain_params(ptr, |params| raw.build_to_runnable(function, params))?;
                }
                Ok(())
            }),
        ),
        (
            "runtime stream capture",
            Box::new(|| {
                for _ in 0..BUILDS {
                    let mut data = data_cell.borrow_mut();
                    let graph = stream.capture(CaptureMode::ThreadLocal, |s| {
                        for _ in 0..CHAIN {
                            add_scalar.launch(s, config, (32u32, 1.0f32, &mut **data))?;
                        }
                        Ok(())
                    })?;
                    drop(graph.instantiate()?);
                }
                Ok(())
            }),
        ),
        (
            "runtime build (Graph::add_kernel_node)",
            Box::new(|| {
                for _ in 0..BUILDS {
                    runtime_build_to_runnable(ctx, add_scalar, &mut data_cell.borrow_mut())?;
                }
                Ok(())
            }),
        ),
        (
            "generated pipeline capture (built), no tracking",
            Box::new(|| {
                for _ in 0..BUILDS {
                    let mut data = data_cell.borrow_mut();
                    drop(untracked.capture(ChainParams {
                        n: 32,
                        value: 1.0,
                        data: &mut data,
                    })?);
                }
                Ok(())
            }),
        ),
        (
            "generated pipeline capture (built), tracking",
            Box::new(|| {
                for _ in 0..BUILDS {
                    let mut data = data_cell.borrow_mut();
                    drop(tracked.capture(ChainParams {
                        n: 32,
                        value: 1.0,
                        data: &mut data,
                    })?);
                }
                Ok(())
            }),
        ),
    ];
    let medians = measure(&mut cases)?;
    Ok(cases
        .iter()
        .zip(medians)
        .map(|((case, _), median)| Row {
            group: "capture-to-runnable, 100-kernel step (per graph)",
            case,
            median,
            per: BUILDS,
        })
        .collect())
}

/// The runtime's node-by-node build of the chain (`Graph::add_kernel_node`, each node after
/// the one before), instantiated, then both dropped.
fn runtime_build_to_runnable(
    ctx: &Context,
    add_scalar: &TypedKernel<AddScalar>,
    data: &mut DeviceBuffer<f32>,
) -> Result<Phases> {
    let start = Instant::now();
    let mut graph = Graph::new(ctx)?;
    let config = LaunchConfig::new(1u32, 32u32);
    let mut last = Vec::new();
    for _ in 0..CHAIN {
        let node = graph.add_kernel_node(&last, add_scalar, config, (32u32, 1.0f32, &mut *data))?;
        last = vec![node.node()];
    }
    let built = Instant::now();
    let exec = graph.instantiate()?;
    let instantiated = Instant::now();
    drop(exec);
    drop(graph);
    Ok(phases_until_now(start, built, instantiated))
}

/// One row of the phases table: a way of building, and its mean [`Phases`] per graph.
struct PhaseRow {
    case: &'static str,
    mean: Phases,
}

/// Capture-to-runnable of the chain split into its phases, for the raw build, the runtime's
/// build and a generated pipeline's build: `PHASE_GRAPHS` graphs each after a warm-up, the
/// three interleaved graph by graph, means per graph. Where the time goes: the driver's
/// instantiation and destruction are the same for all three, so what the library adds shows
/// in the build phase alone.
fn phases(ctx: &Context, raw: &Raw, add_scalar: &TypedKernel<AddScalar>) -> Result<Vec<PhaseRow>> {
    let stream = Stream::non_blocking(ctx)?;
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32)?;
    stream.synchronize()?;
    let ptr = data.device_ptr().ok_or("a CUDA context")?;
    let function = add_scalar.kernel().handle().ok_or("a CUDA context")?;
    let mut chain = Chain::new(ctx)?;
    chain.set_fault_tracking(false);
    let cases = [
        "raw build (cuGraphAddKernelNode)",
        "runtime build (Graph::add_kernel_node)",
        "generated pipeline build, no tracking",
    ];
    let mut sums = [[Duration::ZERO; 3]; 3];
    for graph in 0..PHASE_WARMUP + PHASE_GRAPHS {
        for k in 0..cases.len() {
            // Each graph starts one case later, so no case always follows the same one.
            let case = (graph + k) % cases.len();
            let phases = match case {
                0 => with_chain_params(ptr, |params| raw.build_to_runnable(function, params))?,
                1 => runtime_build_to_runnable(ctx, add_scalar, &mut data)?,
                _ => chain::build_to_runnable(&mut chain, &mut data)?,
            };
            if graph >= PHASE_WARMUP {
                for (sum, phase) in sums[case].iter_mut().zip(phases) {
                    *sum += phase;
                }
            }
        }
    }
    Ok(cases
        .into_iter()
        .zip(sums)
        .map(|(case, sum)| PhaseRow {
            case,
            mean: sum.map(|d| d / PHASE_GRAPHS as u32),
        })
        .collect())
}

fn loops(ctx: &Context, add_scalar: &TypedKernel<AddScalar>) -> Result<Vec<Row>> {
    let stream = Stream::non_blocking(ctx)?;
    let mut residual = DeviceBuffer::<f32>::zeros(&stream, 1)?;
    let mut staging = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    stream.synchronize()?;
    let start = ITERATIONS as f32;
    let one = LaunchConfig::new(1u32, 1u32);

    // The runtime's device loop: memset the residual, then WHILE residual > 0.5.
    let mut graph = Graph::new(ctx)?;
    let init = graph.add_memset_u32_node(&[], &mut residual, start.to_bits())?;
    let condition = Condition::compare(&residual, Comparison::Greater, 0.5f32);
    let looping = graph.add_while_node(&[init], condition, ITERATIONS + 1, |body| {
        body.add_kernel_node(&[], add_scalar, one, (1u32, -1.0f32, &mut residual))?;
        Ok(())
    })?;
    let exec = graph.instantiate()?;
    exec.upload(&stream)?;

    let mut pipeline = Converge::new(ctx)?;
    let mut pipeline_residual = DeviceBuffer::<f32>::zeros(&stream, 1)?;
    stream.synchronize()?;
    let mut eager = Converge::new(ctx)?;
    let mut eager_residual = DeviceBuffer::<f32>::zeros(&stream, 1)?;
    stream.synchronize()?;
    let mut replay = pipeline.capture(ConvergeParams {
        start,
        limit: ITERATIONS + 1,
        residual: &mut pipeline_residual,
    })?;
    let residual_cell = std::cell::RefCell::new(&mut residual);

    let mut cases: Vec<Case<'_>> = vec![
        (
            "device WHILE node (runtime graph)",
            Box::new(|| {
                exec.launch(&stream)?;
                stream.synchronize()?;
                exec.check_loops()?;
                if looping.state().iterations() != ITERATIONS {
                    return Err("the device loop ran the wrong number of iterations".into());
                }
                Ok(())
            }),
        ),
        (
            "device WHILE node (generated replay)",
            Box::new(|| {
                replay.launch()?;
                Ok(replay.synchronize()?)
            }),
        ),
        (
            "host loop (generated eager run)",
            Box::new(|| {
                let run = eager.run(ConvergeParams {
                    start,
                    limit: ITERATIONS + 1,
                    residual: &mut eager_residual,
                })?;
                Ok(run.wait()?)
            }),
        ),
        (
            "host loop (runtime: launch, copy back, synchronize)",
            Box::new(|| {
                let mut residual = residual_cell.borrow_mut();
                stream.memset_u32(&mut **residual, start.to_bits())?;
                loop {
                    stream.copy_dtoh(&**residual, &mut staging)?;
                    if staging.as_slice()?[0] <= 0.5 {
                        return Ok(());
                    }
                    add_scalar.launch(&stream, one, (1u32, -1.0f32, &mut **residual))?;
                }
            }),
        ),
    ];
    let medians = measure(&mut cases)?;
    Ok(cases
        .iter()
        .zip(medians)
        .map(|((case, _), median)| Row {
            group: "convergence loop (per iteration)",
            case,
            median,
            per: ITERATIONS,
        })
        .collect())
}

fn run(ctx: &Context) -> Result<(Vec<Row>, Vec<PhaseRow>)> {
    let raw = Raw::open()?;
    let module = Module::load_ptx(ctx, PTX)?.named("test_kernels");
    // SAFETY: add_scalar(unsigned, float, float*) from test_kernels.cu.
    let add_scalar: TypedKernel<AddScalar> = unsafe { module.function("add_scalar")?.typed()? };
    let mut rows = builds(ctx, &raw, &add_scalar)?;
    rows.extend(loops(ctx, &add_scalar)?);
    let phases = phases(ctx, &raw, &add_scalar)?;
    Ok((rows, phases))
}

/// The phases table: µs per graph, and each total against the raw build's.
fn print_phases(rows: &[PhaseRow]) {
    println!();
    println!("capture-to-runnable in phases, 100-kernel step (mean per graph of {PHASE_GRAPHS})");
    println!(
        "| {:<40} | {:>9} | {:>11} | {:>9} | {:>9} | {:>7} |",
        "case", "build", "instantiate", "destroy", "total", "ratio"
    );
    println!(
        "| {:-<40} | {:->9} | {:->11} | {:->9} | {:->9} | {:->7} |",
        "", "", "", "", "", ""
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let total = |p: &Phases| us(p[0]) + us(p[1]) + us(p[2]);
    let baseline = rows.first().map_or(1.0, |r| total(&r.mean));
    for row in rows {
        let [build, instantiate, destroy] = row.mean.map(us);
        println!(
            "| {:<40} | {build:>9.1} | {instantiate:>11.1} | {destroy:>9.1} | {:>9.1} | {:>7.3} |",
            row.case,
            total(&row.mean),
            total(&row.mean) / baseline
        );
    }
}

fn main() {
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("graph_build benchmark skipped: no CUDA device ({e})");
            return;
        }
    };
    let device = ctx
        .device()
        .and_then(|d| d.name().ok())
        .unwrap_or_else(|| "unknown device".to_owned());
    let (rows, phases) = match run(&ctx) {
        Ok(results) => results,
        Err(e) => {
            eprintln!("graph_build benchmark failed: {e}");
            std::process::exit(1);
        }
    };
    println!("graph building and device loops on {device}: median of {REPS} runs after a warm-up");
    let mut group = "";
    let mut baseline = 0.0;
    for row in rows {
        let per = row.median.as_secs_f64() * 1e6 / f64::from(row.per);
        if row.group != group {
            group = row.group;
            baseline = per;
            println!();
            println!("{group}");
            println!("| {:<52} | {:>12} | {:>10} |", "case", "time", "ratio");
            println!("| {:-<52} | {:->12} | {:->10} |", "", "", "");
        }
        println!(
            "| {:<52} | {:>9.3} µs | {:>10.3} |",
            row.case,
            per,
            per / baseline
        );
    }
    print_phases(&phases);
}
