//! Launch overhead of the runtime against raw driver calls, measured in the same run.
//!
//! - per kernel launch: 100 000 launches of an empty kernel (and of a three-argument kernel
//!   writing a buffer), enqueued and completed, through `TypedKernel::launch` and through
//!   `cuLaunchKernel` called directly;
//! - per graph node: a captured chain of 100 empty kernels replayed 1 000 times, through
//!   `GraphExec::launch` and through `cuGraphLaunch` called directly.
//!
//! The raw baseline opens the driver library itself (`GPU_PIPELINE_LIBCUDA`, else
//! `libcuda.so.1`) and calls the same function, stream and executable graph. Each case runs
//! once to warm up, then `REPS` times alternating runtime and raw; the table shows medians.
//! Without a GPU it prints why and exits successfully.
//!
//! Run with `cargo bench -p gpu-pipeline --bench launch`.

#[path = "../../benches/raw_driver.rs"]
mod raw_driver;

use std::ffi::c_void;
use std::time::{Duration, Instant};

use gpu_pipeline::sys;
use gpu_pipeline::{
    CaptureMode, Context, DeviceBuffer, GraphExec, LaunchConfig, Module, Stream, TypedKernel,
};
use raw_driver::{Driver, check};

const PTX: &str = include_str!("../kernels/test_kernels.ptx");
const LAUNCHES: u32 = 100_000;
const CHAIN: u32 = 100;
const REPLAYS: u32 = 1_000;
const REPS: usize = 7;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;
type AddScalar = (u32, f32, &'static mut [f32]);

/// The entry points the raw baseline calls, straight from the library.
struct Raw {
    launch_kernel: sys::PFN_cuLaunchKernel,
    graph_launch: sys::PFN_cuGraphLaunch,
    synchronize: sys::PFN_cuStreamSynchronize,
    _driver: Driver,
}

impl Raw {
    fn open() -> Result<Raw> {
        let driver = Driver::open()?;
        // SAFETY: these exported symbols have the signatures `sys` declares for them
        // (none of them has a versioned variant).
        unsafe {
            Ok(Raw {
                launch_kernel: driver.get(b"cuLaunchKernel\0")?,
                graph_launch: driver.get(b"cuGraphLaunch\0")?,
                synchronize: driver.get(b"cuStreamSynchronize\0")?,
                _driver: driver,
            })
        }
    }

    /// `count` launches of `function` with `params` on `stream`, then a synchronize.
    fn launches(
        &self,
        function: sys::CUfunction,
        stream: sys::CUstream,
        params: &mut [*mut c_void],
        count: u32,
    ) -> Result<()> {
        for _ in 0..count {
            // SAFETY: a live function and stream of the current context; `params` matches
            // the kernel's parameters and outlives the call.
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
        // SAFETY: a live stream.
        check(unsafe { (self.synchronize)(stream) }, "cuStreamSynchronize")
    }

    fn replays(&self, exec: &GraphExec, stream: sys::CUstream, count: u32) -> Result<()> {
        for _ in 0..count {
            // SAFETY: a live executable graph and stream of the current context.
            let code =
                unsafe { (self.graph_launch)(exec.handle().ok_or("a CUDA context")?, stream) };
            check(code, "cuGraphLaunch")?;
        }
        // SAFETY: a live stream.
        check(unsafe { (self.synchronize)(stream) }, "cuStreamSynchronize")
    }
}

/// Runs `runtime` and `raw` once each to warm up, then `REPS` times alternating; returns
/// the median duration of each.
fn measure(
    mut runtime: impl FnMut() -> Result<()>,
    mut raw: impl FnMut() -> Result<()>,
) -> Result<(Duration, Duration)> {
    runtime()?;
    raw()?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        let start = Instant::now();
        runtime()?;
        ours.push(start.elapsed());
        let start = Instant::now();
        raw()?;
        theirs.push(start.elapsed());
    }
    ours.sort();
    theirs.sort();
    Ok((ours[REPS / 2], theirs[REPS / 2]))
}

struct Row {
    case: &'static str,
    runtime: Duration,
    raw: Duration,
    per: u32,
}

fn run(ctx: &Context) -> Result<Vec<Row>> {
    let raw = Raw::open()?;
    let stream = Stream::non_blocking(ctx)?;
    let module = Module::load_ptx(ctx, PTX)?.named("test_kernels");
    // SAFETY: empty() and add_scalar(unsigned, float, float*) from test_kernels.cu.
    let empty: TypedKernel<()> = unsafe { module.function("empty")?.typed()? };
    // SAFETY: as above.
    let add_scalar: TypedKernel<AddScalar> = unsafe { module.function("add_scalar")?.typed()? };
    let config = LaunchConfig::new(1, 32);
    let mut rows = Vec::new();

    let (ours, theirs) = measure(
        || {
            for _ in 0..LAUNCHES {
                empty.launch(&stream, config, ())?;
            }
            Ok(stream.synchronize()?)
        },
        || {
            raw.launches(
                empty.kernel().handle().ok_or("a CUDA context")?,
                stream.handle().ok_or("a CUDA context")?,
                &mut [],
                LAUNCHES,
            )
        },
    )?;
    rows.push(Row {
        case: "empty kernel, per launch",
        runtime: ours,
        raw: theirs,
        per: LAUNCHES,
    });

    let mut buffer = DeviceBuffer::<f32>::zeros(&stream, 32)?;
    stream.synchronize()?;
    let ptr = buffer.device_ptr().ok_or("a CUDA context")?;
    let (ours, theirs) = measure(
        || {
            for _ in 0..LAUNCHES {
                add_scalar.launch(&stream, config, (32u32, 1.0f32, &mut buffer))?;
            }
            Ok(stream.synchronize()?)
        },
        || {
            let (mut n, mut value, mut data) = (32u32, 1.0f32, ptr);
            let mut params = [
                (&raw mut n).cast::<c_void>(),
                (&raw mut value).cast::<c_void>(),
                (&raw mut data).cast::<c_void>(),
            ];
            raw.launches(
                add_scalar.kernel().handle().ok_or("a CUDA context")?,
                stream.handle().ok_or("a CUDA context")?,
                &mut params,
                LAUNCHES,
            )
        },
    )?;
    rows.push(Row {
        case: "add_scalar(n, v, &mut buf), per launch",
        runtime: ours,
        raw: theirs,
        per: LAUNCHES,
    });

    let graph = stream.capture(CaptureMode::ThreadLocal, |s| {
        for _ in 0..CHAIN {
            empty.launch(s, config, ())?;
        }
        Ok(())
    })?;
    let exec = graph.instantiate()?;
    exec.upload(&stream)?;
    let (ours, theirs) = measure(
        || {
            for _ in 0..REPLAYS {
                exec.launch(&stream)?;
            }
            Ok(stream.synchronize()?)
        },
        || raw.replays(&exec, stream.handle().ok_or("a CUDA context")?, REPLAYS),
    )?;
    rows.push(Row {
        case: "graph replay (100-kernel chain), per node",
        runtime: ours,
        raw: theirs,
        per: REPLAYS * CHAIN,
    });
    Ok(rows)
}

fn main() {
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("launch benchmark skipped: no CUDA device ({e})");
            return;
        }
    };
    let device = ctx
        .device()
        .and_then(|d| d.name().ok())
        .unwrap_or_else(|| "unknown device".to_owned());
    let rows = match run(&ctx) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("launch benchmark failed: {e}");
            std::process::exit(1);
        }
    };
    println!("launch overhead on {device}: median of {REPS} runs after a warm-up");
    println!();
    println!(
        "| {:<42} | {:>12} | {:>12} | {:>13} |",
        "case", "runtime", "raw driver", "runtime / raw"
    );
    println!("| {:-<42} | {:->12} | {:->12} | {:->13} |", "", "", "", "");
    for row in rows {
        let ours = row.runtime.as_secs_f64() * 1e6 / f64::from(row.per);
        let theirs = row.raw.as_secs_f64() * 1e6 / f64::from(row.per);
        println!(
            "| {:<42} | {:>9.3} µs | {:>9.3} µs | {:>13.3} |",
            row.case,
            ours,
            theirs,
            ours / theirs
        );
    }
}
