//! The yardstick of `jacobi`'s speed: the same solver written with raw CUDA driver calls and
//! one graph per parity, as a program without gpu-pipeline would do it. Both graphs are
//! captured once (sweep `a -> b` and `b -> a`, each with the residual reduced on the compute
//! stream and copied back on a copy stream behind an event) and launched alternately; the
//! host reads the residual from pinned memory after a stream synchronize every `check_every`
//! sweeps. Device memory, the two streams and the events come from gpu-pipeline (where they
//! live makes no difference to the driver); module loading, captures, launches, the copy's
//! pinned memory and the synchronizations are raw driver calls on a library this module
//! opens itself.

use std::ffi::{CString, c_void};
use std::time::{Duration, Instant};

use gpu_pipeline::sys::{self, CUresult};
use gpu_pipeline::{
    Context, DEFAULT_DRIVER_PATHS, DRIVER_PATH_ENV, DeviceBuffer, Event, EventFlags, Stream,
};
use libloading::Library;

use super::{host, initial_grid};
use crate::common::BoxError;

/// The kernels' PTX (tools/build-ptx).
const PTX: &str = include_str!("../../kernels/jacobi.ptx");
const CUDA: &str = "the raw-driver solver needs a CUDA context, not the CPU backend";

/// The driver entry points the yardstick calls, straight from the library.
struct Driver {
    ctx_set_current: sys::PFN_cuCtxSetCurrent,
    module_load_data: sys::PFN_cuModuleLoadData,
    module_unload: sys::PFN_cuModuleUnload,
    module_get_function: sys::PFN_cuModuleGetFunction,
    launch_kernel: sys::PFN_cuLaunchKernel,
    event_record: sys::PFN_cuEventRecord,
    wait_event: sys::PFN_cuStreamWaitEvent,
    memcpy_dtoh: sys::PFN_cuMemcpyDtoHAsync,
    mem_host_alloc: sys::PFN_cuMemHostAlloc,
    mem_free_host: sys::PFN_cuMemFreeHost,
    begin_capture: sys::PFN_cuStreamBeginCapture,
    end_capture: sys::PFN_cuStreamEndCapture,
    instantiate: sys::PFN_cuGraphInstantiateWithFlags,
    graph_launch: sys::PFN_cuGraphLaunch,
    exec_destroy: sys::PFN_cuGraphExecDestroy,
    graph_destroy: sys::PFN_cuGraphDestroy,
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
                // SAFETY: each exported symbol has the signature `sys` declares for it; the
                // `_v2` exports are the ABI the runtime uses too.
                Ok(library) => unsafe {
                    return Ok(Driver {
                        ctx_set_current: *library.get(b"cuCtxSetCurrent\0")?,
                        module_load_data: *library.get(b"cuModuleLoadData\0")?,
                        module_unload: *library.get(b"cuModuleUnload\0")?,
                        module_get_function: *library.get(b"cuModuleGetFunction\0")?,
                        launch_kernel: *library.get(b"cuLaunchKernel\0")?,
                        event_record: *library.get(b"cuEventRecord\0")?,
                        wait_event: *library.get(b"cuStreamWaitEvent\0")?,
                        memcpy_dtoh: *library.get(b"cuMemcpyDtoHAsync_v2\0")?,
                        mem_host_alloc: *library.get(b"cuMemHostAlloc\0")?,
                        mem_free_host: *library.get(b"cuMemFreeHost\0")?,
                        begin_capture: *library.get(b"cuStreamBeginCapture_v2\0")?,
                        end_capture: *library.get(b"cuStreamEndCapture\0")?,
                        instantiate: *library.get(b"cuGraphInstantiateWithFlags\0")?,
                        graph_launch: *library.get(b"cuGraphLaunch\0")?,
                        exec_destroy: *library.get(b"cuGraphExecDestroy\0")?,
                        graph_destroy: *library.get(b"cuGraphDestroy\0")?,
                        stream_synchronize: *library.get(b"cuStreamSynchronize\0")?,
                        _library: library,
                    });
                },
                Err(e) => errors.push(format!("{path}: {e}")),
            }
        }
        Err(format!("cannot open the CUDA driver: {}", errors.join("; ")).into())
    }
}

fn ok(code: CUresult, call: &str) -> Result<(), BoxError> {
    if code.is_success() {
        Ok(())
    } else {
        Err(format!("{call} failed with {code:?}").into())
    }
}

/// What the yardstick created and must release, in reverse order, after its streams drained.
struct Owned<'d> {
    driver: &'d Driver,
    module: sys::CUmodule,
    host: *mut c_void,
    graphs: Vec<(sys::CUgraph, sys::CUgraphExec)>,
}

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        // SAFETY: every handle was created by this driver and nothing runs any more (the
        // owner synchronizes both streams before this drops, also on error paths).
        unsafe {
            for &(graph, exec) in &self.graphs {
                (self.driver.exec_destroy)(exec);
                (self.driver.graph_destroy)(graph);
            }
            if !self.host.is_null() {
                (self.driver.mem_free_host)(self.host);
            }
            if !self.module.is_null() {
                (self.driver.module_unload)(self.module);
            }
        }
    }
}

/// Times `iterations` sweeps (after two warm-up sweeps, one per graph) of the raw-driver
/// solver on an `nx` by `ny` grid, reading the residual every `check_every` sweeps; returns
/// the time and the final grid (to compare with the pipeline's, bit for bit).
pub fn time_sweeps(
    ctx: &Context,
    nx: u32,
    ny: u32,
    iterations: u32,
    check_every: u32,
) -> Result<(Duration, Vec<f32>), BoxError> {
    let raw_ctx = ctx.handle().ok_or(CUDA)?;
    let driver = Driver::open()?;
    let compute = Stream::non_blocking(ctx)?;
    let copy = Stream::non_blocking(ctx)?;
    let init = initial_grid(nx, ny);
    let grids = [
        DeviceBuffer::from_slice(&compute, &init)?,
        DeviceBuffer::from_slice(&compute, &init)?,
    ];
    let blocks = host::blocks(nx, ny);
    let block_max = DeviceBuffer::<f32>::zeros(&compute, blocks)?;
    let residual = DeviceBuffer::<f32>::zeros(&compute, 1)?;
    compute.synchronize()?;
    let (computed, copied) = (
        Event::with_flags(ctx, EventFlags::ORDERING)?,
        Event::with_flags(ctx, EventFlags::ORDERING)?,
    );
    let (a, b) = (compute.handle().ok_or(CUDA)?, copy.handle().ok_or(CUDA)?);
    let (e1, e2) = (computed.handle().ok_or(CUDA)?, copied.handle().ok_or(CUDA)?);
    let ptr = |buffer: &DeviceBuffer<f32>| buffer.device_ptr().ok_or(CUDA);
    let grid_ptr = [ptr(&grids[0])?, ptr(&grids[1])?];
    let (block_ptr, residual_ptr) = (ptr(&block_max)?, ptr(&residual)?);

    // SAFETY: `raw_ctx` is the live context of `ctx`, which outlives this function.
    let code = unsafe { (driver.ctx_set_current)(raw_ctx) };
    ok(code, "cuCtxSetCurrent")?;
    let mut owned = Owned {
        driver: &driver,
        module: std::ptr::null_mut(),
        host: std::ptr::null_mut(),
        graphs: Vec::new(),
    };
    let ptx = CString::new(PTX)?;
    // SAFETY: a valid out-pointer and NUL-terminated PTX; the context is current.
    let code = unsafe { (driver.module_load_data)(&mut owned.module, ptx.as_ptr().cast()) };
    ok(code, "cuModuleLoadData")?;
    let function = |name: &std::ffi::CStr| -> Result<sys::CUfunction, BoxError> {
        let mut function = std::ptr::null_mut();
        // SAFETY: a valid out-pointer, a loaded module and a NUL-terminated name.
        let code =
            unsafe { (driver.module_get_function)(&mut function, owned.module, name.as_ptr()) };
        ok(code, "cuModuleGetFunction")?;
        Ok(function)
    };
    let (sweep, reduce) = (function(c"jacobi_sweep")?, function(c"reduce_max")?);
    // SAFETY: a valid out-pointer; 4 bytes of page-locked memory, freed by `owned`.
    let code = unsafe { (driver.mem_host_alloc)(&mut owned.host, 4, 0) };
    ok(code, "cuMemHostAlloc")?;
    let host_residual = owned.host;

    // One graph per parity: sweep `from -> to`, reduce, copy the residual back on `b`.
    for parity in 0..2 {
        let (mut nx, mut ny) = (nx, ny);
        let (mut src, mut dst) = (grid_ptr[parity], grid_ptr[1 - parity]);
        let (mut partial, mut out, mut n) = (block_ptr, residual_ptr, blocks as u32);
        let mut sweep_params: [*mut c_void; 5] = [
            (&raw mut nx).cast(),
            (&raw mut ny).cast(),
            (&raw mut src).cast(),
            (&raw mut dst).cast(),
            (&raw mut partial).cast(),
        ];
        let mut partial_in = block_ptr;
        let mut reduce_params: [*mut c_void; 3] = [
            (&raw mut n).cast(),
            (&raw mut partial_in).cast(),
            (&raw mut out).cast(),
        ];
        let (mut graph, mut exec) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: live streams, events and functions of the current context; the parameter
        // arrays point at values of each kernel's parameter types and outlive the calls (the
        // driver copies them); every pointer is a live allocation of the right size, which
        // outlives every launch of the graphs (they are destroyed first, by `owned`).
        unsafe {
            ok(
                (driver.begin_capture)(a, sys::CUstreamCaptureMode::THREAD_LOCAL),
                "cuStreamBeginCapture",
            )?;
            let launched = (|| {
                ok(
                    (driver.launch_kernel)(
                        sweep,
                        nx.div_ceil(host::BLOCK.0),
                        ny.div_ceil(host::BLOCK.1),
                        1,
                        host::BLOCK.0,
                        host::BLOCK.1,
                        1,
                        0,
                        a,
                        sweep_params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    ),
                    "cuLaunchKernel",
                )?;
                ok(
                    (driver.launch_kernel)(
                        reduce,
                        1,
                        1,
                        1,
                        256,
                        1,
                        1,
                        0,
                        a,
                        reduce_params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    ),
                    "cuLaunchKernel",
                )?;
                ok((driver.event_record)(e1, a), "cuEventRecord")?;
                ok((driver.wait_event)(b, e1, 0), "cuStreamWaitEvent")?;
                ok(
                    (driver.memcpy_dtoh)(host_residual, residual_ptr, 4, b),
                    "cuMemcpyDtoHAsync",
                )?;
                ok((driver.event_record)(e2, b), "cuEventRecord")?;
                ok((driver.wait_event)(a, e2, 0), "cuStreamWaitEvent")
            })();
            let ended = ok((driver.end_capture)(a, &mut graph), "cuStreamEndCapture");
            launched?;
            ended?;
            let instantiated = ok(
                (driver.instantiate)(&mut exec, graph, 0),
                "cuGraphInstantiateWithFlags",
            );
            if instantiated.is_err() {
                (driver.graph_destroy)(graph);
            }
            instantiated?;
        }
        owned.graphs.push((graph, exec));
    }
    let execs = [owned.graphs[0].1, owned.graphs[1].1];
    let synchronize = |stream: sys::CUstream| {
        // SAFETY: a live stream of this context.
        ok(
            unsafe { (driver.stream_synchronize)(stream) },
            "cuStreamSynchronize",
        )
    };
    let launch = |k: u32| {
        // SAFETY: a live executable graph and stream of this context.
        ok(
            unsafe { (driver.graph_launch)(execs[(k % 2) as usize], a) },
            "cuGraphLaunch",
        )
    };
    let timed = (|| {
        launch(0)?;
        launch(1)?;
        synchronize(a)?;
        let start = Instant::now();
        for k in 2..iterations + 2 {
            launch(k)?;
            if (k - 1).is_multiple_of(check_every) {
                synchronize(a)?;
                // SAFETY: 4 bytes of page-locked memory the last copy (complete: its
                // stream joined `a`, which the host synchronized) wrote; nothing writes it
                // until the next launch.
                let value = unsafe { std::ptr::read_volatile(host_residual.cast::<f32>()) };
                if !value.is_finite() {
                    return Err("the raw solver's residual is not finite".into());
                }
            }
        }
        synchronize(a)?;
        Ok::<_, BoxError>(start.elapsed())
    })();
    // Whatever happened, nothing may still run when the graphs and memory go.
    let drained = synchronize(a).and(synchronize(b));
    let elapsed = timed?;
    drained?;
    drop(owned);
    let last = grids[(iterations % 2) as usize].to_vec(&compute)?;
    Ok((elapsed, last))
}
