//! CUDA events.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::driver::check;
use crate::error::Result;
use crate::sys::{self, CUresult};

use super::Context;

/// An owned `CUevent`.
///
/// Invariant: `raw` is an event created in `ctx` by `cuEventCreate` and destroyed once, in
/// `Drop` (CUDA defers the release until pending records complete, and no memory of ours is
/// behind an event, so dropping a recorded event is fine).
pub(crate) struct Event {
    ctx: Arc<Context>,
    raw: sys::CUevent,
    /// The capture id when last recorded on a capturing stream (0: not in a capture), so a
    /// stream that waits on it is known to join that capture.
    capture: AtomicU64,
}

// SAFETY: CUDA events may be recorded, queried and destroyed from any thread.
unsafe impl Send for Event {}
// SAFETY: every method takes `&self` and maps to a thread-safe driver call.
unsafe impl Sync for Event {}

impl Event {
    /// A new event with raw `CU_EVENT_*` flags.
    pub(crate) fn new(ctx: &Arc<Context>, flags: u32) -> Result<Event> {
        let d = ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the context is current.
        check("cuEventCreate", unsafe {
            (d.cuEventCreate)(&mut raw, flags)
        })?;
        Ok(Event {
            ctx: ctx.clone(),
            raw,
            capture: AtomicU64::new(0),
        })
    }

    /// The context the event belongs to.
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The raw handle: live for as long as `self` (the type's invariant).
    pub(crate) fn raw(&self) -> sys::CUevent {
        self.raw
    }

    /// Notes the capture the event was just recorded in (`None`: an eager record).
    pub(crate) fn set_recorded_in_capture(&self, capture: Option<u64>) {
        self.capture.store(capture.unwrap_or(0), Ordering::Release);
    }

    /// The capture the event was last recorded in.
    pub(crate) fn recorded_in_capture(&self) -> Option<u64> {
        match self.capture.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Whether the work before the most recent record has completed.
    pub(crate) fn query(&self) -> Result<bool> {
        let d = self.ctx.bind()?;
        // SAFETY: a live event of the current context (the type's invariant).
        match unsafe { (d.cuEventQuery)(self.raw) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuEventQuery", code).map(|()| false),
        }
    }

    /// Blocks until the work before the most recent record has completed.
    pub(crate) fn synchronize(&self) -> Result<()> {
        let d = self.ctx.bind()?;
        // SAFETY: a live event of the current context (the type's invariant).
        check("cuEventSynchronize", unsafe {
            (d.cuEventSynchronize)(self.raw)
        })
    }

    /// Milliseconds between two recorded, completed events with timing. Events of two
    /// contexts are refused by the driver (an error, not undefined behaviour).
    pub(crate) fn elapsed(start: &Event, end: &Event) -> Result<f32> {
        let d = start.ctx.bind()?;
        let mut ms = 0.0;
        // SAFETY: a valid out-pointer and two live events (the type's invariant).
        check("cuEventElapsedTime", unsafe {
            (d.cuEventElapsedTime)(&mut ms, start.raw, end.raw)
        })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let Ok(d) = self.ctx.bind() else {
            return;
        };
        // SAFETY: we own the event (the type's invariant); CUDA defers the destruction until
        // pending records complete.
        let code = unsafe { (d.cuEventDestroy)(self.raw) };
        if !code.is_success() {
            tracing::warn!(?code, "cuEventDestroy failed while dropping an event");
        }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Event")
            .field("raw", &self.raw)
            .finish()
    }
}
