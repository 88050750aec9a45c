//! The yardstick of `nbody`'s speed: the classic tiled shared-memory N-body kernel
//! (`examples/kernels/nbody_anchor.cu`, after GPU Gems 3 chapter 31 and NVIDIA's cuda-samples
//! `nbody`), one fused kernel per step, launched with raw CUDA driver calls from a library
//! this module opens itself, as a program without gpu-pipeline would. It runs in the same
//! process on the same device, at the same body count and for the same number of steps as
//! the pipeline it is compared with. Device memory and the stream come from gpu-pipeline
//! (where they live makes no difference to a kernel); module loading, launches and the
//! synchronization are raw driver calls.

use std::ffi::{CString, c_void};
use std::fmt;
use std::time::Instant;

use gpu_pipeline::sys::{self, CUresult};
use gpu_pipeline::{Context, DEFAULT_DRIVER_PATHS, DRIVER_PATH_ENV, DeviceBuffer, Stream};
use libloading::Library;

use super::Bodies;
use crate::common::BoxError;

/// The anchor kernel's PTX (tools/build-ptx).
const PTX: &str = include_str!("../../kernels/nbody_anchor.ptx");
/// Threads per block = bodies per shared-memory tile, fixed by the kernel.
const TILE: u32 = 256;

/// The throughputs of the pipeline and of the anchor, in body-body interactions per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Steps each side ran (after one warm-up step).
    pub steps: u32,
    /// The captured `NbodyStep` pipeline: graph replays, nothing else in between.
    pub ours: f64,
    /// The classic kernel launched with raw driver calls.
    pub anchor: f64,
}

impl Comparison {
    /// `ours / anchor`: 1 is as fast as the classic kernel.
    pub fn ratio(&self) -> f64 {
        self.ours / self.anchor
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "speed, {} steps each after one warm-up step:",
            self.steps
        )?;
        writeln!(
            f,
            "  ours:   {:>9.1} G interactions/s  (captured pipeline: 2 kernels + a copy per step)",
            self.ours / 1e9
        )?;
        writeln!(
            f,
            "  anchor: {:>9.1} G interactions/s  (classic tiled kernel, raw driver launches)",
            self.anchor / 1e9
        )?;
        writeln!(f, "  ours / anchor = {:.2} (target >= 0.5)", self.ratio())
    }
}

/// Steps for the comparison: about 2e11 interactions (a fraction of a second on a recent
/// GPU at large n), at least 10 and at most 20 000 (a second or two at small n, where the
/// GPU is far from full).
pub fn benchmark_steps(n: u32) -> u32 {
    let pairs = f64::from(n) * f64::from(n);
    (2e11 / pairs).clamp(10.0, 20_000.0) as u32
}

/// The driver entry points the anchor calls, straight from the library.
struct Driver {
    ctx_set_current: sys::PFN_cuCtxSetCurrent,
    module_load_data: sys::PFN_cuModuleLoadData,
    module_unload: sys::PFN_cuModuleUnload,
    module_get_function: sys::PFN_cuModuleGetFunction,
    launch_kernel: sys::PFN_cuLaunchKernel,
    stream_synchronize: sys::PFN_cuStreamSynchronize,
    _library: Library,
}

impl Driver {
    /// Opens the library gpu-pipeline loaded (`GPU_PIPELINE_LIBCUDA`, else the default names).
    fn open() -> Result<Driver, BoxError> {
        let paths: Vec<String> = match std::env::var(DRIVER_PATH_ENV) {
            Ok(path) if !path.is_empty() => vec![path],
            _ => DEFAULT_DRIVER_PATHS
                .iter()
                .map(|p| (*p).to_owned())
                .collect(),
        };
        let mut errors = Vec::new();
        for path in &paths {
            // SAFETY: the CUDA driver library, already loaded and initialised by gpu-pipeline
            // in this process; loading it again runs no new initialisers.
            match unsafe { Library::new(path) } {
                Ok(library) => return Driver::from_library(library),
                Err(e) => errors.push(format!("{path}: {e}")),
            }
        }
        Err(format!("cannot open the CUDA driver: {}", errors.join("; ")).into())
    }

    fn from_library(library: Library) -> Result<Driver, BoxError> {
        // SAFETY: each exported symbol has the signature `sys` declares for it (the plain
        // names are the ABI these entry points have had since CUDA 4).
        unsafe {
            Ok(Driver {
                ctx_set_current: *library.get(b"cuCtxSetCurrent\0")?,
                module_load_data: *library.get(b"cuModuleLoadData\0")?,
                module_unload: *library.get(b"cuModuleUnload\0")?,
                module_get_function: *library.get(b"cuModuleGetFunction\0")?,
                launch_kernel: *library.get(b"cuLaunchKernel\0")?,
                stream_synchronize: *library.get(b"cuStreamSynchronize\0")?,
                _library: library,
            })
        }
    }
}

fn ok(code: CUresult, call: &str) -> Result<(), BoxError> {
    if code.is_success() {
        Ok(())
    } else {
        Err(format!("{call} failed with {code:?}").into())
    }
}

/// A loaded module, unloaded on drop.
struct LoadedModule<'d> {
    driver: &'d Driver,
    raw: sys::CUmodule,
}

impl Drop for LoadedModule<'_> {
    fn drop(&mut self) {
        // SAFETY: `raw` was loaded by this driver and every launch from it has completed (the
        // owner synchronizes its stream before dropping it, also on error paths: a failed
        // launch enqueued nothing).
        let code = unsafe { (self.driver.module_unload)(self.raw) };
        if !code.is_success() {
            eprintln!("warning: cuModuleUnload failed with {code:?}");
        }
    }
}

/// Runs the anchor for `steps` steps (after one warm-up step) from `bodies` and returns its
/// body-body interactions per second, timed on the host around the launches and one final
/// synchronization, as the pipeline's replays are.
pub fn interactions_per_second(
    ctx: &Context,
    bodies: &Bodies,
    dt: f32,
    eps2: f32,
    steps: u32,
) -> Result<f64, BoxError> {
    let raw_ctx = ctx
        .handle()
        .ok_or("the anchor needs a CUDA context, not the CPU backend")?;
    let driver = Driver::open()?;
    let n = u32::try_from(bodies.pos.len() / 4)?;
    let stream = Stream::non_blocking(ctx)?;
    // Two copies of the state: each step reads one pair and writes the other.
    let pos = [
        DeviceBuffer::from_slice(&stream, &bodies.pos)?,
        DeviceBuffer::from_slice(&stream, &bodies.pos)?,
    ];
    let vel = [
        DeviceBuffer::from_slice(&stream, &bodies.vel)?,
        DeviceBuffer::from_slice(&stream, &bodies.vel)?,
    ];
    stream.synchronize()?;

    // SAFETY: `raw_ctx` is the live context of `ctx`, which outlives this function.
    let code = unsafe { (driver.ctx_set_current)(raw_ctx) };
    ok(code, "cuCtxSetCurrent")?;
    let ptx = CString::new(PTX)?;
    let mut raw_module = std::ptr::null_mut();
    // SAFETY: a valid out-pointer and NUL-terminated PTX; the context is current.
    let code = unsafe { (driver.module_load_data)(&mut raw_module, ptx.as_ptr().cast()) };
    ok(code, "cuModuleLoadData")?;
    let module = LoadedModule {
        driver: &driver,
        raw: raw_module,
    };
    let mut function = std::ptr::null_mut();
    let name = c"integrate_bodies";
    // SAFETY: a valid out-pointer, a loaded module and a NUL-terminated name.
    let code = unsafe { (driver.module_get_function)(&mut function, module.raw, name.as_ptr()) };
    ok(code, "cuModuleGetFunction")?;

    const CUDA: &str = "the anchor needs a CUDA context, not the CPU backend";
    let raw_stream = stream.handle().ok_or(CUDA)?;
    let ptr = |b: &DeviceBuffer<f32>| b.device_ptr().ok_or(CUDA);
    let pos_ptr = [ptr(&pos[0])?, ptr(&pos[1])?];
    let vel_ptr = [ptr(&vel[0])?, ptr(&vel[1])?];
    let launch = |step: u32| -> Result<(), BoxError> {
        let (from, to) = ((step % 2) as usize, ((step + 1) % 2) as usize);
        let (mut n, mut dt, mut eps2) = (n, dt, eps2);
        let (mut old_pos, mut old_vel) = (pos_ptr[from], vel_ptr[from]);
        let (mut new_pos, mut new_vel) = (pos_ptr[to], vel_ptr[to]);
        let mut params: [*mut c_void; 7] = [
            (&raw mut n).cast(),
            (&raw mut dt).cast(),
            (&raw mut eps2).cast(),
            (&raw mut old_pos).cast(),
            (&raw mut old_vel).cast(),
            (&raw mut new_pos).cast(),
            (&raw mut new_vel).cast(),
        ];
        // SAFETY: `integrate_bodies(u32, f32, f32, const float4*, const float4*, float4*,
        // float4*)` gets a pointer to a value of each parameter's type; the four buffers hold
        // 4 n floats each, live until after the final synchronization, and nothing else uses
        // them; the kernel writes only the `to` pair, which no launch in flight reads (launches
        // on one stream run in order).
        let code = unsafe {
            (driver.launch_kernel)(
                function,
                n.div_ceil(TILE),
                1,
                1,
                TILE,
                1,
                1,
                0,
                raw_stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        ok(code, "cuLaunchKernel")
    };
    let synchronize = || {
        // SAFETY: `raw_stream` is a live stream of this context (`stream` outlives this).
        let code = unsafe { (driver.stream_synchronize)(raw_stream) };
        ok(code, "cuStreamSynchronize")
    };

    let timed = (|| {
        launch(0)?;
        synchronize()?;
        let start = Instant::now();
        for step in 1..=steps {
            launch(step)?;
        }
        synchronize()?;
        Ok::<_, BoxError>(start.elapsed())
    })();
    // Whatever happened, nothing may still run when the module and buffers go.
    let drained = synchronize();
    let elapsed = timed?;
    drained?;
    drop(module);

    // A broken launch that reported nothing would leave garbage: the state must be finite.
    let last = pos[((steps + 1) % 2) as usize].to_vec(&stream)?;
    if !last.iter().all(|x| x.is_finite()) {
        return Err("the anchor kernel produced non-finite positions".into());
    }
    Ok(f64::from(n) * f64::from(n) * f64::from(steps) / elapsed.as_secs_f64())
}
