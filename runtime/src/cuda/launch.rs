//! Kernel launches and kernel node parameters.

use std::ffi::c_void;
use std::sync::Arc;

use crate::driver::check;
use crate::error::{Error, Result};
use crate::launch::config::LaunchConfig;
use crate::sys;

use super::keep::{self, Keep};
use super::{DeviceMemory, Function, Stream};

/// The arguments of one launch, as the CUDA backend takes them. Implemented by the crate's
/// argument tuples (`launch/args.rs`).
pub(crate) trait CudaArgs {
    /// Packs the arguments on the stack and calls `f` with the `void*[]` the driver reads,
    /// one pointer per argument, valid only during `f`.
    fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R;

    /// Calls `f` with the device memory of every buffer argument; fails for an argument that
    /// is not CUDA memory.
    fn visit_memory(&self, f: impl FnMut(&Arc<DeviceMemory>)) -> Result<()>;
}

/// Checks that `function`'s module belongs to `stream`'s context, and `args`' memory to it or
/// to a context it has peer access to (a kernel may store into a neighbour GPU's memory, as
/// `peer(..)` launches of a pipeline over a device array do).
fn check_contexts(
    call: &'static str,
    stream: &Stream,
    function: &Function,
    args: &impl CudaArgs,
) -> Result<()> {
    let ctx = stream.context();
    if function.module().context().raw() != ctx.raw() {
        return Err(Error::mismatch(
            call,
            "the kernel is loaded in another context than the stream's",
        ));
    }
    let mut foreign = false;
    args.visit_memory(|memory| foreign |= !ctx.peer_access_enabled(memory.context()))?;
    if foreign {
        return Err(Error::mismatch(
            call,
            "a buffer argument belongs to another context than the stream, one this context \
             has no peer access to",
        ));
    }
    Ok(())
}

/// Enqueues `function` on `stream` with `args`. The caller validated `config` against the
/// kernel's limits, and vouched (through `Kernel::typed` or `Kernel::launch`) that the
/// arguments match the kernel's parameters.
pub(crate) fn launch(
    call: &'static str,
    stream: &Stream,
    function: &Function,
    config: &LaunchConfig,
    args: &impl CudaArgs,
) -> Result<()> {
    check_contexts(call, stream, function, args)?;
    function.ensure_dynamic_shared(config.shared_mem_bytes)?;
    let mut shared = Some(stream.gate());
    let mut capture = stream.capture_now()?;
    let mut _exclusive = None;
    if capture.is_some() {
        // A captured launch identifies its node as the capture's one leaf right after it
        // (`note_kernel_node`): no other enqueue on the handle may come in between, so it
        // holds the gate exclusively (captures are not hot paths).
        drop(shared.take());
        _exclusive = Some(stream.gate_exclusive());
        capture = stream.capture_now()?;
    }
    args.visit_memory(|memory| {
        memory.note_use(stream);
        if let Some(id) = capture {
            keep::keep(id, Keep::Device(memory.clone()));
        }
    })?;
    if let Some(id) = capture {
        keep::keep(id, Keep::Object(function.module().clone()));
    }
    let d = stream.bind()?;
    let (g, b) = (config.grid, config.block);
    let code = args.with_params(|params| {
        // SAFETY: a live function of the stream's context (checked above) and a live stream;
        // validated dimensions and shared memory (the caller's check); one pointer per
        // parameter to a packed value whose layout matches it (the caller's promise through
        // `Kernel::typed` / `Kernel::launch`), valid for the call (the driver copies the
        // values before returning). Every buffer argument's memory outlives the launch: its
        // free waits for the context, and a capture keeps it (above).
        unsafe {
            (d.cuLaunchKernel)(
                function.raw(),
                g.x,
                g.y,
                g.z,
                b.x,
                b.y,
                b.z,
                config.shared_mem_bytes,
                stream.raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    });
    check("cuLaunchKernel", code)?;
    if let Some(id) = capture {
        // The node just added, in launch order (see `Graph::kernel_nodes_in_launch_order`).
        keep::note_kernel_node(stream, id);
    }
    Ok(())
}

/// Builds the node parameters of a kernel node launching `function` with `config`, calling
/// `f` with them while the packed arguments they point at are alive.
#[inline]
pub(crate) fn with_node_params<R>(
    function: &Function,
    config: &LaunchConfig,
    args: &impl CudaArgs,
    f: impl FnOnce(&sys::CUDA_KERNEL_NODE_PARAMS) -> Result<R>,
) -> Result<R> {
    function.ensure_dynamic_shared(config.shared_mem_bytes)?;
    let (g, b) = (config.grid, config.block);
    args.with_params(|params| {
        f(&sys::CUDA_KERNEL_NODE_PARAMS {
            func: function.raw(),
            gridDimX: g.x,
            gridDimY: g.y,
            gridDimZ: g.z,
            blockDimX: b.x,
            blockDimY: b.y,
            blockDimZ: b.z,
            sharedMemBytes: config.shared_mem_bytes,
            kernelParams: params.as_mut_ptr(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        })
    })
}
