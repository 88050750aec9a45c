//! The only place NCCL touches the rest of the runtime: streams, contexts, device memory and
//! capture keep-alive. Each function is this layout's spelling of one question; a change of
//! the runtime's internals changes these and nothing else in `nccl/`.

use std::any::Any;
use std::sync::{Arc, RwLockReadGuard};

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

/// The gates of the streams of an NCCL operation (or group), held shared from its
/// bookkeeping until NCCL has enqueued it: a capture cannot begin or end on those streams in
/// between (see `cuda/stream.rs`), so each operation is wholly inside a capture, which keeps
/// its memory, or wholly outside one, where its use is recorded for the free rule.
pub(super) struct Gates<'s> {
    /// The one gate of an ungrouped operation (no allocation per operation).
    _one: Option<RwLockReadGuard<'s, ()>>,
    /// The gates of a group's other streams.
    _more: Vec<RwLockReadGuard<'s, ()>>,
}

/// Takes the gates of `streams` (each handle once; nothing to take on the CPU backend, which
/// NCCL refuses anyway). Several are taken all at once or not at all, waiting for the one that
/// was not free with none held: ending a capture holds its origin's gate while it waits for
/// the gates of the streams that joined it, so holding one gate while waiting for another
/// could deadlock with it.
pub(super) fn gates<'s>(streams: &[&'s Stream]) -> Gates<'s> {
    if let [one] = streams {
        return Gates {
            _one: one.cuda_only("nccl").ok().map(|s| s.gate()),
            _more: Vec::new(),
        };
    }
    let mut cuda: Vec<&'s crate::cuda::Stream> = Vec::new();
    for s in streams.iter().filter_map(|s| s.cuda_only("nccl").ok()) {
        if !cuda.iter().any(|c| c.gate_key() == s.gate_key()) {
            cuda.push(s);
        }
    }
    loop {
        let mut guards = Vec::with_capacity(cuda.len());
        let mut busy = None;
        for s in &cuda {
            match s.try_gate() {
                Some(guard) => guards.push(guard),
                None => {
                    busy = Some(*s);
                    break;
                }
            }
        }
        let Some(busy) = busy else {
            return Gates {
                _one: None,
                _more: guards,
            };
        };
        drop(guards);
        // Wait for the busy one with nothing held, then try again.
        drop(busy.gate());
    }
}

/// Records that work touching `memory` is enqueued on `stream` (for the stream-ordered free
/// rule) and keeps its allocation alive in the graph being captured there, if any. The
/// caller holds `stream`'s gate in `_gates`.
pub(super) fn note_enqueue<T: Pod, M: DeviceSource<T> + ?Sized>(
    memory: &M,
    stream: &Stream,
    _gates: &Gates<'_>,
) {
    let region = memory.device_region();
    let (Some(range), Ok(s)) = (region.cuda(), stream.cuda_only("nccl")) else {
        return;
    };
    range.memory.note_use(s);
    if let Ok(Some(capture)) = s.capture_now() {
        keep(capture, Keep::Device(range.memory.clone()));
    }
}

/// Keeps `object` (the communicator) alive in the graph being captured on `stream`, if any.
/// The caller holds `stream`'s gate in `_gates`.
pub(super) fn keep_in_capture(
    stream: &Stream,
    object: Arc<dyn Any + Send + Sync>,
    _gates: &Gates<'_>,
) {
    let Ok(s) = stream.cuda_only("nccl") else {
        return;
    };
    if let Ok(Some(capture)) = s.capture_now() {
        keep(capture, Keep::Object(object));
    }
}
