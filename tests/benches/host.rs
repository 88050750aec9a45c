//! The host backend's throughput: operations per second on one host stream for empty work,
//! unchecked against checked (the race detector's cost), and generated pipeline steps per
//! second. Needs no GPU and no CUDA driver: it runs in CI.
//!
//! | case | work per run |
//! | --- | --- |
//! | `host fn (no-op closure)` | `OPS` × `Stream::launch_host_fn` of one shared no-op closure, then one synchronize |
//! | `empty kernel launch` | `OPS` × launch of `empty` (host implementation: a no-op), then one synchronize |
//! | `memset of 4 bytes` | `OPS` × `Stream::memset_u8` of a one-element buffer, then one synchronize |
//! | `pipeline step (2 streams)` | `STEPS` × the `CrossStream` step (`run_steps`: a kernel on `a`, an event, a kernel on `b`, the join), then one wait |
//! | `pipeline graph replay` | the same step captured once, `STEPS` replays, then one synchronize |
//!
//! Each case runs once to warm up, then `REPS` times, unchecked and checked interleaved; the
//! table shows the medians as operations (or steps) per second and the checked mode's
//! slowdown. `cargo bench -p tests --bench host`; results also go to
//! `target/bench/host.json`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_pipeline::{
    Context, DeviceBuffer, HostKernel, LaunchConfig, Module, Stream, TypedKernel, gpu_pipeline,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");
const OPS: usize = 100_000;
const STEPS: usize = 10_000;
const REPS: usize = 5;
const N: u32 = 32;

type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Host implementation of `add_scalar`.
fn add_scalar_host(n: u32, value: f32, data: &mut [f32]) {
    for x in &mut data[..n as usize] {
        *x += value;
    }
}

/// Host implementation of `saxpy`.
fn saxpy_host(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
    let n = n as usize;
    for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
        *y = a.mul_add(*x, *y);
    }
}

gpu_pipeline! {
    /// The pipeline bench's cross-stream step, with host implementations.
    pipeline CrossStream {
        streams { a(non_blocking), b(non_blocking) }
        unsafe kernels k = ptx(PTX) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) host = add_scalar_host;
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) host = saxpy_host;
        }
        params { n: u32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage first on a { launch k::add_scalar(n, 1.0f32, x) grid 1u32 block 32u32; }
        stage second on b { launch k::saxpy(n, 1.0f32, x, y) grid 1u32 block 32u32; }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// One case on both contexts (0 unchecked, 1 checked): warm-up, then `REPS` interleaved
/// runs; returns the median seconds of each.
fn measure(f: &mut dyn FnMut(usize) -> BoxResult<()>) -> BoxResult<[f64; 2]> {
    f(0)?;
    f(1)?;
    let mut samples: [Vec<Duration>; 2] = Default::default();
    for _ in 0..REPS {
        for (mode, s) in samples.iter_mut().enumerate() {
            let start = Instant::now();
            f(mode)?;
            s.push(start.elapsed());
        }
    }
    let [a, b] = samples;
    Ok([median(a).as_secs_f64(), median(b).as_secs_f64()])
}

/// One row: operations per run and the median seconds, unchecked and checked.
struct Row {
    case: &'static str,
    unit: &'static str,
    per_run: usize,
    seconds: [f64; 2],
}

/// Everything one context needs.
struct Backend {
    ctx: Context,
    stream: Stream,
    empty: TypedKernel<()>,
    one: DeviceBuffer<f32>,
    pipeline: CrossStream,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
}

impl Backend {
    fn new(ctx: Context) -> BoxResult<Backend> {
        let stream = Stream::non_blocking(&ctx)?;
        let module = Module::load_ptx(&ctx, PTX)?.named("test_kernels");
        // SAFETY: `empty()` in test_kernels.cu takes no parameters.
        let empty = unsafe { module.function("empty")?.typed::<()>()? };
        let empty = empty.with_host(HostKernel::new(|| {}));
        let one = DeviceBuffer::<f32>::zeros(&stream, 1)?.named("one");
        let init: Vec<f32> = (0..N).map(|i| i as f32 * 0.5 - 3.0).collect();
        let x = DeviceBuffer::from_slice(&stream, &init)?.named("x");
        let y = DeviceBuffer::from_slice(&stream, &init)?.named("y");
        stream.synchronize()?;
        let mut pipeline = CrossStream::new(&ctx)?;
        pipeline.set_fault_tracking(false);
        Ok(Backend {
            ctx,
            stream,
            empty,
            one,
            pipeline,
            x,
            y,
        })
    }
}

/// The backend's step captured once.
fn capture(b: &mut Backend) -> gpu_pipeline::Result<CrossStreamGraph<'_>> {
    b.pipeline.capture(CrossStreamParams {
        n: N,
        x: &mut b.x,
        y: &mut b.y,
    })
}

fn run() -> BoxResult<Vec<Row>> {
    let mut backends = [
        Backend::new(Context::host())?,
        Backend::new(Context::host_checked())?,
    ];
    let mut rows = Vec::new();

    let noop: Arc<dyn Fn() + Send + Sync> = Arc::new(|| {});
    let seconds = measure(&mut |mode| {
        let b = &backends[mode];
        for _ in 0..OPS {
            b.stream.launch_host_fn(Arc::clone(&noop))?;
        }
        Ok(b.stream.synchronize()?)
    })?;
    rows.push(Row {
        case: "host fn (no-op closure)",
        unit: "ops/s",
        per_run: OPS,
        seconds,
    });

    let config = LaunchConfig::new(1u32, 1u32);
    let seconds = measure(&mut |mode| {
        let b = &backends[mode];
        for _ in 0..OPS {
            b.empty.launch(&b.stream, config, ())?;
        }
        Ok(b.stream.synchronize()?)
    })?;
    rows.push(Row {
        case: "empty kernel launch",
        unit: "ops/s",
        per_run: OPS,
        seconds,
    });

    let seconds = measure(&mut |mode| {
        let b = &mut backends[mode];
        for _ in 0..OPS {
            b.stream.memset_u8(&mut b.one, 0)?;
        }
        Ok(b.stream.synchronize()?)
    })?;
    rows.push(Row {
        case: "memset of 4 bytes",
        unit: "ops/s",
        per_run: OPS,
        seconds,
    });

    let seconds = measure(&mut |mode| {
        let b = &mut backends[mode];
        let params = CrossStreamParams {
            n: N,
            x: &mut b.x,
            y: &mut b.y,
        };
        Ok(b.pipeline.run_steps(params, STEPS)?.wait()?)
    })?;
    rows.push(Row {
        case: "pipeline step (2 streams)",
        unit: "steps/s",
        per_run: STEPS,
        seconds,
    });

    {
        let [unchecked, checked] = &mut backends;
        let mut graphs = [capture(unchecked)?, capture(checked)?];
        let seconds = measure(&mut |mode| {
            let graph = &mut graphs[mode];
            for _ in 0..STEPS {
                graph.launch()?;
            }
            Ok(graph.synchronize()?)
        })?;
        rows.push(Row {
            case: "pipeline graph replay",
            unit: "steps/s",
            per_run: STEPS,
            seconds,
        });
    }

    let checked = &backends[1].ctx;
    let races = checked.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(rows)
}

fn main() {
    let start = Instant::now();
    let rows = match run() {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("host bench failed: {e}");
            std::process::exit(1);
        }
    };
    let threads = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "\nhost backend ({threads} CPU threads): medians of {REPS} runs after warm-up, {:.1} s in all",
        start.elapsed().as_secs_f64()
    );
    println!(
        "| case | unit | unchecked | checked | µs each, unchecked | µs each, checked | checked slowdown |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    let mut json = Vec::new();
    for row in &rows {
        let rate = row.seconds.map(|s| row.per_run as f64 / s);
        let us = row.seconds.map(|s| s * 1e6 / row.per_run as f64);
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.3} | {:.3} | {:.2} |",
            row.case,
            row.unit,
            rate[0],
            rate[1],
            us[0],
            us[1],
            row.seconds[1] / row.seconds[0]
        );
        json.push(format!(
            "{{\"case\":\"{}\",\"unit\":\"{}\",\"unchecked\":{:.1},\"checked\":{:.1}}}",
            row.case, row.unit, rate[0], rate[1]
        ));
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let json = format!("{{\"rows\":[{}]}}\n", json.join(","));
    if std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("host.json"), json))
        .is_err()
    {
        eprintln!("could not write target/bench/host.json");
    }
}
