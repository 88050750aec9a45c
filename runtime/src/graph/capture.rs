//! Stream capture: recording a stream's work into a [`Graph`] instead of running it. It lives
//! with graphs, so streams need not know graphs.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use super::{Graph, GraphBackend};
use crate::context::Context;
use crate::cuda;
use crate::error::Result;
use crate::stream::{Stream, StreamBackend};
use crate::sys::{self, CUstreamCaptureMode, CUstreamCaptureStatus};

/// How a capture restricts CUDA calls that are unsafe during capture (`CUstreamCaptureMode`).
///
/// ```
/// use gpu_pipeline::{CaptureMode, Context, DeviceBuffer, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut data = DeviceBuffer::<u32>::zeros(&stream, 8)?;
/// // The closure form ends the capture even when the closure fails.
/// let graph = stream.capture(CaptureMode::ThreadLocal, |s| s.memset_u32(&mut data, 5))?;
/// graph.instantiate()?.launch(&stream)?;
/// assert_eq!(data.to_vec(&stream)?, [5; 8]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// Unsafe calls from any thread fail while this capture is active (CUDA's default).
    #[default]
    Global,
    /// Unsafe calls fail only on the capturing thread: the mode for multi-threaded programs.
    ThreadLocal,
    /// No restrictions; the caller vouches for what it calls.
    Relaxed,
}

impl CaptureMode {
    pub(crate) fn raw(self) -> CUstreamCaptureMode {
        match self {
            CaptureMode::Global => CUstreamCaptureMode::GLOBAL,
            CaptureMode::ThreadLocal => CUstreamCaptureMode::THREAD_LOCAL,
            CaptureMode::Relaxed => CUstreamCaptureMode::RELAXED,
        }
    }
}

/// A stream's capture state (`CUstreamCaptureStatus`).
///
/// ```
/// use gpu_pipeline::{CaptureMode, CaptureStatus, Context, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// assert_eq!(stream.capture_status()?, CaptureStatus::None);
/// stream.capture(CaptureMode::Global, |s| {
///     assert!(matches!(s.capture_status()?, CaptureStatus::Active { .. }));
///     Ok(())
/// })?;
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureStatus {
    /// Not capturing.
    None,
    /// Capturing; the value is the capture sequence's unique id.
    Active {
        /// `cuStreamGetCaptureInfo`'s id, shared by every stream joined to this capture.
        id: u64,
    },
    /// The capture was invalidated by an illegal call; `end_capture` will fail.
    Invalidated,
}

impl Stream {
    /// Starts capturing: work enqueued from now on is recorded, not run. Other streams join
    /// the capture by waiting on an event recorded here, and must be joined back (this stream
    /// waits on them) before [`Stream::end_capture`].
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        match self.kind() {
            StreamBackend::Cuda(s) => cuda::capture_api::begin(s, mode.raw()),
            // The CPU backend has no other threads' CUDA calls to restrict: every mode is the
            // same there.
            StreamBackend::Cpu(s) => Ok(s.begin_capture()?),
        }
    }

    /// Ends the capture begun on this stream and returns the recorded graph.
    pub fn end_capture(&self) -> Result<Graph> {
        let backend = match self.kind() {
            StreamBackend::Cuda(s) => GraphBackend::Cuda(cuda::capture_api::end(s)?),
            StreamBackend::Cpu(s) => GraphBackend::Cpu(s.end_capture()?),
        };
        Ok(Graph::from_backend(self.context(), backend))
    }

    /// Captures what `body` enqueues into a graph. The capture always ends, also when `body`
    /// returns an error (which is returned, the partial graph discarded) or panics (the panic
    /// resumes after the capture has ended).
    pub fn capture<F>(&self, mode: CaptureMode, body: F) -> Result<Graph>
    where
        F: FnOnce(&Stream) -> Result<()>,
    {
        self.begin_capture(mode)?;
        let outcome = catch_unwind(AssertUnwindSafe(|| body(self)));
        let ended = self.end_capture();
        match outcome {
            Err(panic) => resume_unwind(panic),
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => ended,
        }
    }

    /// Whether the stream is capturing (an invalidated capture counts as capturing).
    pub fn is_capturing(&self) -> Result<bool> {
        Ok(self.capture_status()? != CaptureStatus::None)
    }

    /// Whether work enqueued on this handle now is recorded into a capture, from the state
    /// the handle tracks (the driver is asked only for a borrowed CUDA handle, as every
    /// enqueue does): cheaper than [`Stream::is_capturing`], for hot paths.
    pub(crate) fn capturing_now(&self) -> Result<bool> {
        match self.kind() {
            StreamBackend::Cuda(s) => {
                let _gate = s.gate();
                Ok(s.capture_now()?.is_some())
            }
            StreamBackend::Cpu(s) => Ok(s.is_capturing()),
        }
    }

    /// The capture state, with the capture id while active (on the CPU backend the id is 0:
    /// captures there have no driver id).
    pub fn capture_status(&self) -> Result<CaptureStatus> {
        match self.kind() {
            StreamBackend::Cuda(s) => {
                let (status, id) = cuda::capture_api::status(s)?;
                Ok(match status {
                    CUstreamCaptureStatus::NONE => CaptureStatus::None,
                    CUstreamCaptureStatus::ACTIVE => CaptureStatus::Active { id },
                    _ => CaptureStatus::Invalidated,
                })
            }
            StreamBackend::Cpu(s) => Ok(if s.is_capturing() {
                CaptureStatus::Active { id: 0 }
            } else {
                CaptureStatus::None
            }),
        }
    }
}

/// Exchanges the calling thread's capture mode (`cuThreadExchangeStreamCaptureMode`) and
/// returns the previous one, so code that must make a capture-unsafe call can relax it.
pub fn exchange_thread_capture_mode(ctx: &Context, mode: CaptureMode) -> Result<CaptureMode> {
    let raw = ctx
        .cuda_only("exchange_thread_capture_mode")?
        .exchange_capture_mode(mode.raw())?;
    Ok(match raw {
        sys::CUstreamCaptureMode::THREAD_LOCAL => CaptureMode::ThreadLocal,
        sys::CUstreamCaptureMode::RELAXED => CaptureMode::Relaxed,
        _ => CaptureMode::Global,
    })
}
