//! The only place NCCL touches the rest of the runtime: streams, contexts, device memory and
//! capture keep-alive. Each function is this layout's spelling of one question; a change of
//! the runtime's internals changes these and nothing else in `nccl/`.

use std::any::Any;
use std::sync::Arc;

use bytemuck::Pod;

use crate::context::{Backend, Context};
use crate::cuda::{Keep, keep_in_capture as keep};
use crate::error::{Error, Result};
use crate::memory::view::DeviceSource;
use crate::stream::Stream;
use crate::sys;

/// Makes `ctx` current on this thread (NCCL's runtime calls use the current context); fails
/// on the CPU backend.
pub(super) fn bind(ctx: &Context, call: &'static str) -> Result<()> {
    ctx.cuda_only(call)?.bind().map(|_| ())
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
    if !stream.context().shares_memory_with(ctx) {
        return Err(Error::invalid(
            call,
            "the stream belongs to another context (device) than the communicator",
        ));
    }
    let s = stream.cuda_only(call)?;
    // A borrowed stream that foreign code captures could not keep this work's memory alive.
    s.capture_now()?;
    Ok(s.raw())
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
    match region.cuda() {
        Some(range) if region.alloc.ctx.shares_memory_with(stream.context()) => Ok(Span {
            ptr: range.ptr(),
            len: region.len,
        }),
        _ => Err(Error::invalid(
            call,
            format!("the {what} buffer is not CUDA memory of the stream's context"),
        )),
    }
}

/// Records that work touching `memory` is enqueued on `stream` (for the stream-ordered free
/// rule) and keeps its allocation alive in the graph being captured there, if any. Takes the
/// stream's gate for the bookkeeping; the NCCL call itself is made after it is released.
pub(super) fn note_enqueue<T: Pod, M: DeviceSource<T> + ?Sized>(memory: &M, stream: &Stream) {
    let region = memory.device_region();
    let (Some(range), Ok(s)) = (region.cuda(), stream.cuda_only("nccl")) else {
        return;
    };
    let _gate = s.gate();
    range.memory.note_use(s);
    if let Ok(Some(capture)) = s.capture_now() {
        keep(capture, Keep::Device(range.memory.clone()));
    }
}

/// Keeps `object` (the communicator) alive in the graph being captured on `stream`, if any.
pub(super) fn keep_in_capture(stream: &Stream, object: Arc<dyn Any + Send + Sync>) {
    let Ok(s) = stream.cuda_only("nccl") else {
        return;
    };
    let _gate = s.gate();
    if let Ok(Some(capture)) = s.capture_now() {
        keep(capture, Keep::Object(object));
    }
}
