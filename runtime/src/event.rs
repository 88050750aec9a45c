//! Events: points in a stream's work that other streams and the host can wait on and time.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::context::Context;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::host::{EventOptions, HostEvent};
use crate::sys::{self, CUresult};

/// How an event is created. The default records timing and spins when synchronized.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EventFlags {
    /// Skip timestamps: cheaper to record and wait on, but [`Event::elapsed_time`] fails.
    pub disable_timing: bool,
    /// [`Event::synchronize`] blocks the thread instead of spinning.
    pub blocking_sync: bool,
}

impl EventFlags {
    /// For events used only to order streams: no timing.
    pub const ORDERING: EventFlags = EventFlags {
        disable_timing: true,
        blocking_sync: false,
    };

    pub(crate) fn raw(self) -> u32 {
        let mut raw = sys::CU_EVENT_DEFAULT;
        if self.disable_timing {
            raw |= sys::CU_EVENT_DISABLE_TIMING;
        }
        if self.blocking_sync {
            raw |= sys::CU_EVENT_BLOCKING_SYNC;
        }
        raw
    }
}

/// A CUDA event. Record it on a stream with [`Stream::record_into`](crate::Stream::record_into)
/// or get a fresh one from [`Stream::record`](crate::Stream::record).
///
/// Dropping an event that is recorded but not complete is fine: CUDA defers the release
/// until the event completes, and no memory of ours is behind it.
pub struct Event {
    ctx: Context,
    raw: sys::CUevent,
    flags: EventFlags,
    /// The capture id when last recorded on a capturing stream (0: not in a capture).
    capture: AtomicU64,
    /// The event on the host backend (`raw` is then null).
    host: Option<HostEvent>,
}

// SAFETY: CUDA events may be recorded, queried and destroyed from any thread.
unsafe impl Send for Event {}
// SAFETY: every method takes `&self` and maps to a thread-safe driver call.
unsafe impl Sync for Event {}

impl Event {
    /// A new event with default flags (timing on).
    pub fn new(ctx: &Context) -> Result<Event> {
        Event::with_flags(ctx, EventFlags::default())
    }

    /// A new event with these flags.
    pub fn with_flags(ctx: &Context, flags: EventFlags) -> Result<Event> {
        if let Some(host) = ctx.host_context() {
            // `blocking_sync` changes how a CUDA thread waits; host waits always block.
            let event = host.create_event(EventOptions {
                name: None,
                timing: !flags.disable_timing,
            });
            return Ok(Event {
                ctx: ctx.clone(),
                raw: std::ptr::null_mut(),
                flags,
                capture: AtomicU64::new(0),
                host: Some(event),
            });
        }

        let c = ctx.bound_cuda("Event::new")?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the context is current.
        check("cuEventCreate", unsafe {
            (c.driver.cuEventCreate)(&mut raw, flags.raw())
        })?;
        Ok(Event {
            ctx: ctx.clone(),
            raw,
            flags,
            capture: AtomicU64::new(0),
            host: None,
        })
    }

    /// The flags this event was created with.
    pub fn flags(&self) -> EventFlags {
        self.flags
    }

    /// The context the event belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The host backend's event, or an error on CUDA.
    pub(crate) fn host_event(&self) -> Result<&HostEvent> {
        self.host.as_ref().ok_or_else(|| {
            Error::invalid(
                "Event",
                "a CUDA event cannot be used with a host-backend stream",
            )
        })
    }

    /// The raw handle, for interop. It stays owned by this `Event`; null on the host backend.
    pub fn handle(&self) -> sys::CUevent {
        self.raw
    }

    pub(crate) fn set_recorded_in_capture(&self, capture: Option<u64>) {
        self.capture.store(capture.unwrap_or(0), Ordering::Release);
    }

    pub(crate) fn recorded_in_capture(&self) -> Option<u64> {
        match self.capture.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Whether all work before the most recent record has completed (`true` if never
    /// recorded, as in CUDA).
    pub fn query(&self) -> Result<bool> {
        if let Some(h) = &self.host {
            return Ok(h.query());
        }

        let c = self.ctx.bound_cuda("Event::query")?;
        // SAFETY: `raw` is a live event of this context.
        match unsafe { (c.driver.cuEventQuery)(self.raw) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuEventQuery", code).map(|()| false),
        }
    }

    /// Blocks until the work before the most recent record has completed.
    pub fn synchronize(&self) -> Result<()> {
        if let Some(h) = &self.host {
            return Ok(h.synchronize()?);
        }

        let c = self.ctx.bound_cuda("Event::synchronize")?;
        // SAFETY: `raw` is a live event of this context.
        check("cuEventSynchronize", unsafe {
            (c.driver.cuEventSynchronize)(self.raw)
        })
    }

    /// Milliseconds between `start` and `end`, both recorded and complete, both with timing.
    pub fn elapsed_time(start: &Event, end: &Event) -> Result<f32> {
        for e in [start, end] {
            if e.flags.disable_timing {
                return Err(Error::invalid(
                    "Event::elapsed_time",
                    "an event was created with `disable_timing`; create both with timing on",
                ));
            }
        }
        if let (Some(s), Some(e)) = (&start.host, &end.host) {
            return Ok(HostEvent::elapsed_time(s, e)?);
        }
        let c = start.ctx.bound_cuda("Event::elapsed_time")?;
        let mut ms = 0.0;
        // SAFETY: a valid out-pointer and two live events.
        check("cuEventElapsedTime", unsafe {
            (c.driver.cuEventElapsedTime)(&mut ms, start.raw, end.raw)
        })?;
        Ok(ms)
    }

    /// Milliseconds from `self` to `end`.
    pub fn elapsed_until(&self, end: &Event) -> Result<f32> {
        Event::elapsed_time(self, end)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.host.is_some() {
            return;
        }
        let Ok(c) = self.ctx.bound_cuda("Event::drop") else {
            return;
        };
        // SAFETY: we own the event; CUDA defers destruction until pending records complete.
        let code = unsafe { (c.driver.cuEventDestroy)(self.raw) };
        if !code.is_success() {
            tracing::warn!(?code, "cuEventDestroy failed while dropping an event");
        }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("raw", &self.raw)
            .field("flags", &self.flags)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_to_driver_bits() {
        assert_eq!(EventFlags::default().raw(), 0);
        assert_eq!(EventFlags::ORDERING.raw(), sys::CU_EVENT_DISABLE_TIMING);
        let both = EventFlags {
            disable_timing: true,
            blocking_sync: true,
        };
        assert_eq!(
            both.raw(),
            sys::CU_EVENT_DISABLE_TIMING | sys::CU_EVENT_BLOCKING_SYNC
        );
    }
}
