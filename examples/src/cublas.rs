//! `cublas`: cuBLAS inside a captured pipeline step, through cudarc.
//!
//! One step scales `a` in place with our kernel on stream `compute`, computes `c = a · b` with
//! cuBLAS SGEMM on stream `blas` (a `call` statement), shifts `c` with our kernel on `compute`,
//! and copies `c` back on `copy`. The step runs once eagerly, is captured as one graph (cuBLAS's
//! kernels become nodes of it, between ours), and is replayed; the setters `set_scale` and
//! `set_shift` change our two kernel nodes in place between replays, which works because the
//! graph knows which kernel nodes are the step's own launches and which are cuBLAS's.
//!
//! How cuBLAS is reached:
//! - cuBLAS is loaded at run time by cudarc (feature `dynamic-loading`): from the loader's
//!   path (`LD_LIBRARY_PATH`), else from `GPU_PIPELINE_CUBLAS` (the library file), else from the
//!   `nvidia-cublas` Python wheel that `python3` finds ([`find_cublas`]). Without it the step
//!   runs a naive GEMM kernel of ours instead, and the run says so.
//! - The `CudaBlas` handle is bound to the pipeline's `blas` stream lent to cudarc
//!   ([`Stream::to_cudarc`](gpu_pipeline::Stream::to_cudarc)), with a workspace of ours (so a
//!   captured GEMM allocates nothing), and made before the capture.
//! - Inside the `call`, the buffers are lent to cudarc as views
//!   ([`DeviceBuffer::cudarc_view`]): no copies.
//!
//! On the CPU backend there is no cuBLAS: the call launches the naive GEMM kernel, whose CPU
//! implementation runs in stream order like any kernel, so the same pipeline runs and is
//! checked there too.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use gpu_pipeline::cudarc::cublas::{CudaBlas, Gemm as _, GemmConfig, sys as blas_sys};
use gpu_pipeline::cudarc::driver::{CudaContext, CudaStream};
use gpu_pipeline::{
    Backend, Context, CpuKernel, DeviceBuffer, Error, Module, PinnedBuffer, Stream, TypedKernel,
    TypedStream, gpu_pipeline,
};

use crate::common::{BoxError, Check, Report, Rng, check_cpu_cost, check_output_path};

/// CPU implementations of `examples/kernels/cublas.cu`.
pub mod cpu {
    /// `scale_offset(n, factor, offset, data)`: `data[i] = data[i] * factor + offset`.
    pub fn scale_offset(n: u32, factor: f32, offset: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v = *v * factor + offset;
        }
    }

    /// `gemm_naive(m, n, k, a, b, c)`: `c = a · b`, row-major, sums in ascending `k`.
    pub fn gemm_naive(m: u32, n: u32, k: u32, a: &[f32], b: &[f32], c: &mut [f32]) {
        let (m, n, k) = (m as usize, n as usize, k as usize);
        for row in 0..m {
            for col in 0..n {
                let mut sum = 0.0f32;
                for i in 0..k {
                    sum = a[row * k + i].mul_add(b[i * n + col], sum);
                }
                c[row * n + col] = sum;
            }
        }
    }
}

const PTX: &str = include_str!("../kernels/cublas.ptx");

/// The naive GEMM kernel's parameters: `(m, n, k, a, b, c)`.
pub type NaiveGemm = (
    u32,
    u32,
    u32,
    &'static [f32],
    &'static [f32],
    &'static mut [f32],
);

gpu_pipeline! {
    /// `a *= scale` on `compute`, `c = a · b` by the library on `blas`, `c += shift` on
    /// `compute`, `c` copied back on `copy`.
    pub pipeline GemmStep {
        streams { compute(priority = high), blas(non_blocking), copy(non_blocking) }
        unsafe kernels k = ptx(include_str!("../kernels/cublas.ptx")) {
            fn scale_offset(n: u32, factor: f32, offset: f32, data: &mut [f32; unbounded])
                cpu = crate::cublas::cpu::scale_offset;
        }
        params {
            m: u32,
            n: u32,
            k: u32,
            scale: f32,
            shift: f32,
            gemm: &Gemm,
            a: &mut DeviceBuffer<f32>,
            b: &DeviceBuffer<f32>,
            c: &mut DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        stage prepare on compute {
            launch k::scale_offset(m * k, scale, 0.0, a) grid (m * k).div_ceil(256) block 256;
        }
        stage multiply on blas {
            call crate::cublas::multiply(gemm, m, n, k, a, b, c) reads(gemm, a, b) writes(c);
        }
        stage finish on compute {
            launch k::scale_offset(m * n, 1.0, shift, c) grid (m * n).div_ceil(256) block 256;
        }
        stage download on copy {
            copy c -> out;
        }
    }
}

/// What computes `c = a · b` in the `multiply` stage.
pub enum Gemm {
    /// cuBLAS SGEMM through cudarc, on the pipeline's `blas` stream.
    Cublas(Box<Cublas>),
    /// The naive kernel (CPU backend, or no cuBLAS found).
    Naive(Box<TypedKernel<NaiveGemm>>),
}

impl std::fmt::Debug for Gemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gemm::Cublas(c) => f.debug_tuple("Cublas").field(c).finish(),
            Gemm::Naive(_) => f.write_str("Naive"),
        }
    }
}

impl Gemm {
    /// The naive kernel, with its CPU implementation.
    pub fn naive(ctx: &Context) -> Result<Gemm, BoxError> {
        let module = Module::load_ptx(ctx, PTX)?.named("cublas.ptx");
        // SAFETY: `gemm_naive(unsigned m, n, k, const float* a, const float* b, float* c)`
        // reads `a[0..m*k]`, `b[0..k*n]` and writes `c[0..m*n]`; `multiply` checks the buffer
        // lengths against `m`, `n` and `k` before launching it.
        let kernel = unsafe { module.function("gemm_naive")?.typed::<NaiveGemm>()? }
            .with_cpu(CpuKernel::new(cpu::gemm_naive));
        Ok(Gemm::Naive(Box::new(kernel)))
    }

    /// What does the work, in words.
    pub fn describe(&self) -> String {
        match self {
            Gemm::Cublas(c) => format!("cuBLAS SGEMM through cudarc ({})", c.library),
            Gemm::Naive(_) => "the naive GEMM kernel (no cuBLAS)".to_owned(),
        }
    }
}

/// A cuBLAS handle bound to one pipeline stream, with its workspace.
pub struct Cublas {
    // Field order is drop order: the handle goes before the stream it holds and the workspace
    // it uses.
    blas: CudaBlas,
    stream: Arc<CudaStream>,
    _workspace: DeviceBuffer<u8>,
    /// Where the library was found.
    pub library: String,
}

impl std::fmt::Debug for Cublas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cublas")
            .field("library", &self.library)
            .finish_non_exhaustive()
    }
}

/// cuBLAS's workspace for Hopper and later (32 MiB, NVIDIA's recommendation; 4 MiB suffices
/// elsewhere): with a workspace of its own, a captured routine allocates nothing.
const WORKSPACE_BYTES: usize = 32 << 20;

impl Cublas {
    /// A handle on `stream` (a stream of `ctx`, which must be a CUDA context), or `Ok(None)`
    /// with the reason when cuBLAS cannot be loaded. Drop it before the stream: while it lives
    /// the stream's handle is lent to cudarc.
    pub fn new(ctx: &Context, stream: &Stream) -> Result<Result<Cublas, String>, BoxError> {
        let library = match find_cublas() {
            Ok(library) => library,
            Err(why) => return Ok(Err(why)),
        };
        let device = ctx.device().ok_or("cuBLAS needs a CUDA context")?;
        let cu_ctx = CudaContext::new(device.ordinal())?;
        // SAFETY: no cudarc slice of this context relies on event tracking (none exists);
        // gpu-pipeline orders the work on its streams itself.
        unsafe { cu_ctx.disable_event_tracking() };
        // SAFETY: nothing begins a capture on the lent stream through cudarc: captures are
        // begun by the pipeline, through gpu-pipeline.
        let lent = unsafe { stream.to_cudarc(&cu_ctx)? };
        let blas = CudaBlas::new(Arc::clone(&lent))?;
        let workspace = DeviceBuffer::<u8>::alloc(ctx, WORKSPACE_BYTES)?;
        let address = workspace
            .device_ptr()
            .ok_or("the workspace has no device address")?;
        // SAFETY: a live handle, and `WORKSPACE_BYTES` bytes of device memory of its context,
        // 256-byte aligned (cuMemAlloc aligns far more), that live as long as the handle
        // (`Cublas` drops the handle first) and that nothing else uses. Set after
        // `cublasSetStream`, which resets the workspace.
        unsafe {
            blas_sys::cublasSetWorkspace_v2(
                *blas.handle(),
                address as *mut std::ffi::c_void,
                WORKSPACE_BYTES,
            )
        }
        .result()?;
        Ok(Ok(Cublas {
            blas,
            stream: Arc::clone(&lent),
            _workspace: workspace,
            library,
        }))
    }

    /// `c = a · b` for row-major `a` (`m x k`), `b` (`k x n`), `c` (`m x n`), enqueued on
    /// `stream`, which must be the stream the handle is bound to.
    fn sgemm<M>(
        &self,
        stream: &TypedStream<'_, M>,
        (m, n, k): (u32, u32, u32),
        a: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
        c: &mut DeviceBuffer<f32>,
    ) -> gpu_pipeline::Result<()> {
        if stream.handle().map(|h| h as usize) != Some(self.stream.cu_stream() as usize) {
            return Err(invalid(format!(
                "the cuBLAS handle is bound to another stream than `{}`",
                stream.label()
            )));
        }
        let (a, b) = (a.cudarc_view(&self.stream)?, b.cudarc_view(&self.stream)?);
        let mut c = c.cudarc_view_mut(&self.stream)?;
        let dim =
            |v: u32| i32::try_from(v).map_err(|_| invalid("a dimension exceeds i32".to_owned()));
        let (m, n, k) = (dim(m)?, dim(n)?, dim(k)?);
        // Row-major c = a · b is column-major cᵀ = bᵀ · aᵀ: cuBLAS multiplies b by a.
        let config = GemmConfig {
            transa: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            transb: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            m: n,
            n: m,
            k,
            alpha: 1.0f32,
            lda: n,
            ldb: k,
            beta: 0.0f32,
            ldc: n,
        };
        // SAFETY: column-major b (n x k, ld n), a (k x m, ld k) and c (n x m, ld n) fit in
        // the views: `multiply` checked the lengths against m, n and k.
        unsafe {
            self.blas
                .gemm(config, &b.view(), &a.view(), &mut c.view_mut())
        }
        .map_err(|e| Error::external("cuBLAS (cublasSgemm_v2)", e))
    }
}

/// An argument `multiply` refuses.
fn invalid(message: String) -> Error {
    Error::InvalidArgument {
        call: "cublas::multiply",
        message,
    }
}

/// The `multiply` stage: `c = a · b` with `gemm`, on the pipeline's `blas` stream.
#[allow(
    clippy::too_many_arguments,
    reason = "the stage's own arguments, as the `call` lists them"
)]
pub fn multiply(
    stream: &TypedStream<'_, GemmStepBlas>,
    gemm: &Gemm,
    m: u32,
    n: u32,
    k: u32,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
) -> gpu_pipeline::Result<()> {
    let len = |x: u32, y: u32| x as usize * y as usize;
    if a.len() < len(m, k) || b.len() < len(k, n) || c.len() < len(m, n) {
        return Err(invalid(format!(
            "buffers of {}, {} and {} elements are too short for a {m}x{k} by {k}x{n} product",
            a.len(),
            b.len(),
            c.len()
        )));
    }
    match gemm {
        Gemm::Cublas(cublas) => cublas.sgemm(stream, (m, n, k), a, b, c),
        Gemm::Naive(kernel) => {
            let config =
                gpu_pipeline::LaunchConfig::new((n.div_ceil(16), m.div_ceil(16)), (16, 16));
            stream.launch(kernel, config, (m, n, k, a, b, c))
        }
    }
}

/// Finds cuBLAS and makes sure cudarc can load it: already on the loader's path, or the file
/// `GPU_PIPELINE_CUBLAS` names, or the `nvidia-cublas` wheel that `python3` finds
/// (`site-packages/nvidia/cu13/lib/libcublas.so.13`, or the CUDA 12 wheel's
/// `nvidia/cublas/lib/libcublas.so.12`). A library loaded by its full path is found by
/// cudarc's own `dlopen` of its name. Returns where it was found, or why not.
pub fn find_cublas() -> Result<String, String> {
    // SAFETY: loading libcublas runs its initialisers, which expect nothing of the caller.
    if unsafe { gpu_pipeline::cudarc::cublas::sys::is_culib_present() } {
        return Ok("libcublas on the loader's path".to_owned());
    }
    let mut tried = Vec::new();
    for path in cublas_candidates() {
        if !path.is_file() {
            tried.push(format!("{} (absent)", path.display()));
            continue;
        }
        // SAFETY: as above; the library stays loaded for the rest of the process.
        match unsafe { libloading::Library::new(&path) } {
            Ok(library) => {
                std::mem::forget(library);
                // SAFETY: as above.
                if unsafe { gpu_pipeline::cudarc::cublas::sys::is_culib_present() } {
                    return Ok(path.display().to_string());
                }
                tried.push(format!(
                    "{} (loaded, but not under a name cudarc looks for)",
                    path.display()
                ));
            }
            Err(e) => tried.push(format!("{} ({e})", path.display())),
        }
    }
    Err(format!(
        "libcublas is not on the loader's path (LD_LIBRARY_PATH); tried {}",
        if tried.is_empty() {
            "no other place (set GPU_PIPELINE_CUBLAS to the library file)".to_owned()
        } else {
            tried.join(", ")
        }
    ))
}

/// Where [`find_cublas`] looks beyond the loader's path.
fn cublas_candidates() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::env::var_os("GPU_PIPELINE_CUBLAS")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    // The folders of the `nvidia` namespace package, where NVIDIA's wheels install.
    let python = std::process::Command::new("python3")
        .args([
            "-c",
            "import nvidia, sys; sys.stdout.write('\\n'.join(nvidia.__path__))",
        ])
        .output();
    if let Ok(output) = python
        && output.status.success()
    {
        for dir in String::from_utf8_lossy(&output.stdout).lines() {
            let dir = PathBuf::from(dir);
            paths.push(dir.join("cu13/lib/libcublas.so.13"));
            paths.push(dir.join("cublas/lib/libcublas.so.12"));
        }
    }
    paths
}

/// Flags of the `cublas` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "cublas",
    about = "cuBLAS SGEMM through cudarc inside a captured pipeline step, between two of our \
             kernels, replayed with scalars changed in place, checked against a CPU reference.",
    after_help = "Backend: CUDA device 0 when available, else the CPU backend; \
                  GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked forces one. cuBLAS is loaded at run \
                  time: from LD_LIBRARY_PATH, GPU_PIPELINE_CUBLAS (the library file), or the \
                  nvidia-cublas Python wheel; without it the step runs a naive GEMM kernel.",
    allow_negative_numbers = true
)]
pub struct CublasArgs {
    /// Rows of `a` and `c`.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub m: u32,
    /// Columns of `b` and `c`.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub n: u32,
    /// Columns of `a`, rows of `b`.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub k: u32,
    /// Replays of the captured step (at least 2: the setters change scalars halfway).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub replays: u32,
    /// Print the stage graph of one step (`GemmStep::DOT`) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more step and write its per-stage timings as a Chrome
    /// trace (open it in ui.perfetto.dev).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Print less.
    #[arg(long, short)]
    pub quiet: bool,
    /// Run on the CPU backend even when the estimated time is over two minutes.
    #[arg(long)]
    pub cpu_anyway: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

/// Flops a second the naive GEMM gets on one CPU core (a generous guess: the estimate errs
/// short).
const CPU_FLOPS_PER_CORE: f64 = 2e9;

impl CublasArgs {
    /// The rules clap cannot express: the trace file can be written.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(())
    }

    /// The stage graph `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        self.dot.then(|| GemmStep::DOT.to_owned())
    }
}

/// What a run produced besides its report.
#[derive(Clone, Debug)]
pub struct CublasOutcome {
    /// Backend, checks and timings.
    pub report: Report,
    /// Whether cuBLAS did the multiplications (else the naive kernel did).
    pub used_cublas: bool,
    /// Why cuBLAS was not used, when it was not.
    pub cublas_missing: Option<String>,
}

/// Row-major `a · b + shift` in f64, for the check.
fn reference(a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize), shift: f64) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for row in 0..m {
        for i in 0..k {
            let x = f64::from(a[row * k + i]);
            for col in 0..n {
                c[row * n + col] += x * f64::from(b[i * n + col]);
            }
        }
    }
    c.iter_mut().for_each(|v| *v += shift);
    c
}

/// The largest error of `got` against `want`, relative to the largest `|want|` (at least 1).
fn relative_error(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1.0f64, |s, w| s.max(w.abs()));
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            let d = (f64::from(*g) - w).abs();
            if d.is_nan() { f64::INFINITY } else { d }
        })
        .fold(0.0, f64::max)
        / scale
}

/// The params of one step.
#[allow(clippy::too_many_arguments)]
fn step_params<'a>(
    (m, n, k): (u32, u32, u32),
    (scale, shift): (f32, f32),
    gemm: &'a Gemm,
    a: &'a mut DeviceBuffer<f32>,
    b: &'a DeviceBuffer<f32>,
    c: &'a mut DeviceBuffer<f32>,
    out: &'a mut PinnedBuffer<f32>,
) -> GemmStepParams<'a> {
    GemmStepParams {
        m,
        n,
        k,
        scale,
        shift,
        gemm,
        a,
        b,
        c,
        out,
    }
}

/// Runs the example on `ctx`, then the checks.
pub fn run(ctx: &Context, args: &CublasArgs) -> Result<CublasOutcome, BoxError> {
    args.validate()?;
    let (m, n, k) = (args.m, args.n, args.k);
    // Each replay multiplies once (2 m n k flops); the f64 reference once more.
    let flops = 2.0 * f64::from(m) * f64::from(n) * f64::from(k) * (f64::from(args.replays) + 1.0);
    check_cpu_cost(ctx, args.cpu_anyway, flops, CPU_FLOPS_PER_CORE, "flops")?;
    let mut report = Report::new(ctx);
    let dims = (m as usize, n as usize, k as usize);
    let mut rng = Rng::new(0x5eed);
    let a0: Vec<f32> = (0..dims.0 * dims.2)
        .map(|_| rng.next_f32() * 2.0 - 1.0)
        .collect();
    let b0: Vec<f32> = (0..dims.2 * dims.1)
        .map(|_| rng.next_f32() * 2.0 - 1.0)
        .collect();

    let start = Instant::now();
    let mut pipeline = GemmStep::new(ctx)?;
    let upload = Stream::non_blocking(ctx)?;
    let mut a = DeviceBuffer::from_slice(&upload, &a0)?;
    let b = DeviceBuffer::from_slice(&upload, &b0)?;
    let mut c = DeviceBuffer::<f32>::zeros(&upload, dims.0 * dims.1)?;
    let mut out = PinnedBuffer::<f32>::zeros(ctx, dims.0 * dims.1)?;
    upload.synchronize()?;
    // Declared after the pipeline, so dropped before it: the handle holds its stream.
    let (gemm, cublas_missing) = match ctx.backend() {
        Backend::Cuda => match Cublas::new(ctx, pipeline.blas_stream())? {
            Ok(cublas) => (Gemm::Cublas(Box::new(cublas)), None),
            Err(why) => (Gemm::naive(ctx)?, Some(why)),
        },
        Backend::Cpu => (
            Gemm::naive(ctx)?,
            Some("the CPU backend has no cuBLAS".to_owned()),
        ),
    };
    if let Some(why) = &cublas_missing {
        println!("cuBLAS not used: {why}; the naive GEMM kernel runs instead");
    } else if !args.quiet {
        println!("multiplying with {}", gemm.describe());
    }
    report
        .timings
        .add("setup", start.elapsed(), gemm.describe());

    // The host's copy of `a`, scaled as the steps scale it (by powers of two: exact).
    let mut a_host = a0.clone();
    let scale_host = |a_host: &mut Vec<f32>, scale: f32| {
        a_host.iter_mut().for_each(|v| *v *= scale);
    };
    let (mut scale, mut shift) = (0.5f32, 1.0f32);
    // One eager step.
    let start = Instant::now();
    pipeline
        .run(step_params(
            (m, n, k),
            (scale, shift),
            &gemm,
            &mut a,
            &b,
            &mut c,
            &mut out,
        ))?
        .wait()?;
    report.timings.add("eager step", start.elapsed(), "");
    scale_host(&mut a_host, scale);
    let want = reference(&a_host, &b0, dims, f64::from(shift));
    let eager_error = relative_error(&out.as_slice()?, &want);

    // Captured once; replayed, with both scalars changed in place halfway.
    let start = Instant::now();
    {
        let mut graph = pipeline.capture(step_params(
            (m, n, k),
            (scale, shift),
            &gemm,
            &mut a,
            &b,
            &mut c,
            &mut out,
        ))?;
        report.timings.add("capture", start.elapsed(), "");
        let start = Instant::now();
        for replay in 0..args.replays {
            if replay == args.replays / 2 {
                (scale, shift) = (1.0, -2.0);
                graph.set_scale(scale)?;
                graph.set_shift(shift)?;
            }
            graph.launch()?;
            scale_host(&mut a_host, scale);
        }
        graph.synchronize()?;
        let elapsed = start.elapsed();
        let flops = 2.0 * dims.0 as f64 * dims.1 as f64 * dims.2 as f64 * f64::from(args.replays);
        report.timings.add(
            "replays",
            elapsed,
            format!(
                "{} replays, {:.1} GFLOP/s of GEMM",
                args.replays,
                flops / elapsed.as_secs_f64() / 1e9
            ),
        );
    }
    let want = reference(&a_host, &b0, dims, f64::from(shift));
    let replay_error = relative_error(&out.as_slice()?, &want);

    // f32 sums of k products of values below 1 in magnitude.
    let limit = 1e-5 * (k as f64).sqrt().max(1.0) * 4.0;
    report.checks.push(Check::at_most(
        "eager step vs CPU reference",
        "max |error| / max |c|",
        eager_error,
        limit,
    ));
    report.checks.push(Check::at_most(
        "replays (scalars set in place halfway) vs CPU reference",
        "max |error| / max |c|",
        replay_error,
        limit,
    ));
    report.checks.push(Check::no_races(ctx));

    if let Some(path) = &args.trace {
        let start = Instant::now();
        let profile = pipeline.profile(step_params(
            (m, n, k),
            (scale, shift),
            &gemm,
            &mut a,
            &b,
            &mut c,
            &mut out,
        ))?;
        report.write_trace(path, &profile)?;
        report
            .timings
            .add("trace", start.elapsed(), path.display().to_string());
    }
    let used_cublas = matches!(gemm, Gemm::Cublas(_));
    drop(gemm);
    Ok(CublasOutcome {
        report,
        used_cublas,
        cublas_missing,
    })
}
