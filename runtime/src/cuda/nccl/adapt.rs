//! The only place NCCL touches the rest of the runtime: streams, contexts, device memory and
//! capture keep-alive. Each function is the base layout's spelling of one question; a change
//! of the runtime's internals (issue 11) changes these and nothing else in `nccl/`.

use std::any::Any;
use std::sync::Arc;

use bytemuck::Pod;

use crate::context::{Backend, Context};
use crate::error::{Error, Result};
use crate::memory::alloc::{KeepAlive, same_memory_space};
use crate::memory::view::DeviceSource;
use crate::stream::Stream;
use crate::sys;

/// Makes `ctx` current on this thread (NCCL's runtime calls use the current context); fails
/// on the CPU backend.
pub(super) fn bind(ctx: &Context, call: &'static str) -> Result<()> {
    ctx.bound_cuda(call).map(|_| ())
}

/// The device ordinal of a CUDA context.
pub(super) fn device_ordinal(ctx: &Context) -> Option<usize> {
    ctx.device().map(|d| d.ordinal())
}

/// The raw stream NCCL enqueues on, after checking it is a CUDA stream of `ctx` (the
/// communicator's context).
pub(super) fn raw_stream(
    call: &'static str,
    stream: &Stream,
    ctx: &Context,
) -> Result<sys::CUstream> {
    if stream.context().backend() != Backend::Cuda {
        return Err(Error::BackendMismatch {
            call,
            backend: stream.context().backend().name(),
            reason: "NCCL needs a CUDA stream; on the CPU backend use `collective::World`"
                .to_owned(),
        });
    }
    if !same_memory_space(stream.context(), ctx) {
        return Err(Error::invalid(
            call,
            "the stream belongs to another context (device) than the communicator",
        ));
    }
    Ok(stream.handle())
}

/// A checked device range: its address and length in elements.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) ptr: sys::CUdeviceptr,
    pub(super) len: usize,
}

/// The device range of a buffer or view, after checking it is CUDA memory of the stream's
/// context.
pub(super) fn span<T: Pod, M: DeviceSource<T> + ?Sized>(
    call: &'static str,
    what: &str,
    memory: &M,
    stream: &Stream,
) -> Result<Span> {
    let region = memory.device_region();
    if region.alloc.host.is_some() || !same_memory_space(&region.alloc.ctx, stream.context()) {
        return Err(Error::invalid(
            call,
            format!("the {what} buffer is not CUDA memory of the stream's context"),
        ));
    }
    Ok(Span {
        ptr: region.ptr(),
        len: region.len,
    })
}

/// Records that work touching `memory` is enqueued on `stream` (for the stream-ordered free
/// rule) and keeps its allocation alive in the graph being captured there, if any.
pub(super) fn note_enqueue<T: Pod, M: DeviceSource<T> + ?Sized>(memory: &M, stream: &Stream) {
    memory.device_region().enqueued_on(stream);
}

/// Keeps `object` (the communicator) alive in the graph being captured on `stream`, if any.
pub(super) fn keep_in_capture(stream: &Stream, object: Arc<dyn Any + Send + Sync>) {
    stream.keep_alive_in_capture(|| KeepAlive::Object(object));
}
