//! Stream capture: recording a stream's work into a [`Graph`] instead of running it.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::Stream;
use crate::driver::check;
use crate::error::Result;
use crate::graph::Graph;
use crate::memory::alloc::KeepAlive;
use crate::sys::{self, CUstreamCaptureMode, CUstreamCaptureStatus};

/// How a capture restricts CUDA calls that are unsafe during capture (`CUstreamCaptureMode`).
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
    fn raw(self) -> CUstreamCaptureMode {
        match self {
            CaptureMode::Global => CUstreamCaptureMode::GLOBAL,
            CaptureMode::ThreadLocal => CUstreamCaptureMode::THREAD_LOCAL,
            CaptureMode::Relaxed => CUstreamCaptureMode::RELAXED,
        }
    }
}

/// A stream's capture state (`CUstreamCaptureStatus`).
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

/// Objects a captured graph must keep alive (host closures), by capture id, until
/// `end_capture` moves them into the `Graph`.
static CAPTURE_KEEPALIVE: Mutex<Option<HashMap<u64, Vec<KeepAlive>>>> = Mutex::new(None);

pub(crate) fn register_capture_keepalive(capture_id: u64, object: KeepAlive) {
    let mut map = CAPTURE_KEEPALIVE.lock().unwrap_or_else(|p| p.into_inner());
    map.get_or_insert_with(HashMap::new)
        .entry(capture_id)
        .or_default()
        .push(object);
}

/// The capture-state cells of streams that joined a capture by waiting on one of its events,
/// so `end_capture` can mark them as out of the capture again.
static CAPTURE_JOINED: Mutex<Option<HashMap<u64, Vec<Weak<AtomicU64>>>>> = Mutex::new(None);

pub(crate) fn track_join(capture_id: u64, stream_state: &Arc<AtomicU64>) {
    stream_state.store(capture_id, Ordering::Release);
    let mut map = CAPTURE_JOINED.lock().unwrap_or_else(|p| p.into_inner());
    map.get_or_insert_with(HashMap::new)
        .entry(capture_id)
        .or_default()
        .push(Arc::downgrade(stream_state));
}

fn leave_capture(capture_id: u64) {
    let joined = {
        let mut map = CAPTURE_JOINED.lock().unwrap_or_else(|p| p.into_inner());
        map.as_mut()
            .and_then(|m| m.remove(&capture_id))
            .unwrap_or_default()
    };
    for state in joined.iter().filter_map(Weak::upgrade) {
        let _ = state.compare_exchange(capture_id, 0, Ordering::AcqRel, Ordering::Acquire);
    }
}

fn take_capture_keepalive(capture_id: u64) -> Vec<KeepAlive> {
    let mut map = CAPTURE_KEEPALIVE.lock().unwrap_or_else(|p| p.into_inner());
    map.as_mut()
        .and_then(|m| m.remove(&capture_id))
        .unwrap_or_default()
}

impl Stream {
    /// Starts capturing: work enqueued from now on is recorded, not run. Other streams join
    /// the capture by waiting on an event recorded here, and must be joined back (this stream
    /// waits on them) before [`Stream::end_capture`].
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        if let Some(h) = &self.host {
            // The host backend has no other threads' CUDA calls to restrict: every mode is
            // the same there.
            let _ = mode;
            return Ok(h.begin_capture()?);
        }

        let (c, raw) = self.cuda("Stream::begin_capture")?;
        // SAFETY: a live stream and a valid mode.
        check("cuStreamBeginCapture", unsafe {
            (c.driver.cuStreamBeginCapture)(raw, mode.raw())
        })?;
        // Hot paths (launches, copies) read this instead of asking the driver.
        if let CaptureStatus::Active { id } = self.capture_status()? {
            self.capture.store(id, Ordering::Release);
        }
        Ok(())
    }

    /// Ends the capture begun on this stream and returns the recorded graph.
    pub fn end_capture(&self) -> Result<Graph> {
        if let Some(h) = &self.host {
            return Ok(Graph::from_host(self.context(), h.end_capture()?));
        }

        let id = self.capture_id()?;
        let (c, raw) = self.cuda("Stream::end_capture")?;
        let mut graph = std::ptr::null_mut();
        // SAFETY: a live stream and a valid out-pointer.
        let code = unsafe { (c.driver.cuStreamEndCapture)(raw, &mut graph) };
        // Success or not, every stream of this capture has left it now.
        self.capture.store(0, Ordering::Release);
        if let Some(id) = id {
            leave_capture(id);
        }
        let keepalive = id.map(take_capture_keepalive).unwrap_or_default();
        check("cuStreamEndCapture", code)?;
        // SAFETY: the driver returned a new graph that we now own.
        Ok(unsafe { Graph::from_raw(self.context(), graph, keepalive) })
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

    /// The capture state, with the capture id while active.
    pub fn capture_status(&self) -> Result<CaptureStatus> {
        if let Some(h) = &self.host {
            // Host captures have no driver id; 0 stands for "this stream's capture".
            return Ok(if h.is_capturing() {
                CaptureStatus::Active { id: 0 }
            } else {
                CaptureStatus::None
            });
        }

        let (c, raw) = self.cuda("Stream::capture_status")?;
        let mut status = CUstreamCaptureStatus::NONE;
        let mut id = 0;
        // SAFETY: a live stream; null for the outputs we do not want, which the API allows.
        check("cuStreamGetCaptureInfo", unsafe {
            (c.driver.cuStreamGetCaptureInfo)(
                raw,
                &mut status,
                &mut id,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        })?;
        Ok(match status {
            CUstreamCaptureStatus::NONE => CaptureStatus::None,
            CUstreamCaptureStatus::ACTIVE => CaptureStatus::Active { id },
            _ => CaptureStatus::Invalidated,
        })
    }

    /// The id of the capture this stream takes part in, if any.
    pub(crate) fn capture_id(&self) -> Result<Option<u64>> {
        Ok(match self.capture_status()? {
            CaptureStatus::Active { id } => Some(id),
            _ => None,
        })
    }
}

/// Exchanges the calling thread's capture mode (`cuThreadExchangeStreamCaptureMode`) and
/// returns the previous one, so code that must make a capture-unsafe call can relax it.
pub fn exchange_thread_capture_mode(
    ctx: &crate::Context,
    mode: CaptureMode,
) -> Result<CaptureMode> {
    let c = ctx.bound_cuda("exchange_thread_capture_mode")?;
    let mut raw = mode.raw();
    // SAFETY: a valid in/out pointer.
    check("cuThreadExchangeStreamCaptureMode", unsafe {
        (c.driver.cuThreadExchangeStreamCaptureMode)(&mut raw)
    })?;
    Ok(match raw {
        sys::CUstreamCaptureMode::THREAD_LOCAL => CaptureMode::ThreadLocal,
        sys::CUstreamCaptureMode::RELAXED => CaptureMode::Relaxed,
        _ => CaptureMode::Global,
    })
}
