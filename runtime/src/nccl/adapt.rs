//! The only place NCCL touches the rest of the runtime: streams, contexts, device memory and
//! capture keep-alive. Each function is this layout's spelling of one question; a change of
//! the runtime's internals changes these and nothing else in `nccl/`.
//!
//! Enqueues follow the rule of every other stream operation (`cuda/stream.rs`): the stream's
//! gate is held, shared, from the capture check through the bookkeeping to the NCCL call that
//! enqueues, so an operation is wholly inside a capture (and kept alive by its graph) or
//! wholly outside it, whatever other threads do. [`Enqueue`] is that held gate.

use std::any::Any;
use std::sync::{Arc, RwLockReadGuard};

use bytemuck::Pod;

use crate::context::{Backend, Context};
use crate::cuda::{self, Keep, keep_in_capture as keep};
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
/// communicator's context). Whether it is captured is decided later, under its gate
/// ([`Enqueue::begin`]).
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
    Ok(stream.cuda_only(call)?.raw())
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
    // A CPU stream is the wrong backend whatever the buffer: say that first.
    stream.cuda_only(call)?;
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

/// One stream's gate, held shared from the capture check until the NCCL call that enqueues
/// on the stream has returned (drop it after that call).
pub(super) struct Enqueue<'a> {
    stream: &'a cuda::Stream,
    capture: Option<u64>,
    _gate: RwLockReadGuard<'a, ()>,
}

impl<'a> Enqueue<'a> {
    /// Takes `stream`'s gate and finds the capture an enqueue made now is recorded into (a
    /// capture of a borrowed stream begun by foreign code is an error: its graph could not
    /// keep this work's memory alive).
    pub(super) fn begin(call: &'static str, stream: &'a Stream) -> Result<Enqueue<'a>> {
        let stream = stream.cuda_only(call)?;
        let gate = stream.gate();
        let capture = stream.capture_now()?;
        Ok(Enqueue {
            stream,
            capture,
            _gate: gate,
        })
    }

    /// The handle whose gate this holds, to tell two `Stream` values over one handle apart
    /// from two handles (the gate must never be taken twice by one thread).
    pub(super) fn key(stream: &Stream) -> Option<(usize, usize)> {
        let s = stream.cuda_only("nccl").ok()?;
        Some((s.context().raw() as usize, s.raw() as usize))
    }

    /// Records that the work touches `memory` (for the stream-ordered free rule) and keeps
    /// its allocation alive in the graph being captured, if any.
    pub(super) fn note<T: Pod, M: DeviceSource<T> + ?Sized>(&self, memory: &M) {
        if let Some(range) = memory.device_region().cuda() {
            self.note_memory(range.memory);
        }
    }

    /// [`Enqueue::note`] of an allocation.
    pub(super) fn note_memory(&self, memory: &Arc<cuda::DeviceMemory>) {
        memory.note_use(self.stream);
        if let Some(capture) = self.capture {
            keep(capture, Keep::Device(memory.clone()));
        }
    }

    /// Whether the work enqueued now is recorded into a capture (rather than run).
    pub(super) fn is_capturing(&self) -> bool {
        self.capture.is_some()
    }

    /// Keeps `object` (the communicator) alive in the graph being captured, if any.
    pub(super) fn keep(&self, object: Arc<dyn Any + Send + Sync>) {
        if let Some(capture) = self.capture {
            keep(capture, Keep::Object(object));
        }
    }
}
