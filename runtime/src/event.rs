//! Events: points in a stream's work that other streams and the host can wait on and time.

use crate::context::{Context, ContextBackend};
use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::sys;
use crate::vocab::backend::BackendEvent;

/// How an event is created. The default records timing and spins when synchronized.
///
/// ```
/// use gpu_pipeline::{Context, Event, EventFlags, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let order = Event::with_flags(&ctx, EventFlags::ORDERING)?; // no timing: cheaper
/// stream.record_into(&order)?;
/// order.synchronize()?;
/// let sleepy = EventFlags { blocking_sync: true, ..EventFlags::default() };
/// assert!(!sleepy.disable_timing);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
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

/// An event: a point in a stream's work that other streams wait on, the host waits on or
/// queries, and timings are measured between. Record it on a stream with
/// [`Stream::record_into`](crate::Stream::record_into) or get a fresh one from
/// [`Stream::record`](crate::Stream::record).
///
/// Dropping an event that is recorded but not complete is fine: CUDA defers the release
/// until the event completes, and no memory of ours is behind it.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, Event, Stream};
/// let ctx = Context::cpu();
/// let (producer, consumer) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
/// let start = producer.record()?;
/// // ... enqueue work on `producer` ...
/// let done = producer.record()?;
/// consumer.wait_event(&done)?; // later work on `consumer` runs after it
/// done.synchronize()?; // the host waits too
/// let ms = Event::elapsed_time(&start, &done)?;
/// assert!(ms >= 0.0);
/// # Ok(()) }
/// ```
pub struct Event {
    ctx: Context,
    flags: EventFlags,
    backend: EventBackend,
}

/// The one backend value an [`Event`] holds.
pub(crate) enum EventBackend {
    /// A CUDA event.
    Cuda(cuda::Event),
    /// A CPU-backend event.
    Cpu(cpu::Event),
}

impl Event {
    /// A new event with default flags (timing on).
    pub fn new(ctx: &Context) -> Result<Event> {
        Event::with_flags(ctx, EventFlags::default())
    }

    /// A new event with these flags.
    pub fn with_flags(ctx: &Context, flags: EventFlags) -> Result<Event> {
        let backend = match ctx.kind() {
            ContextBackend::Cuda(c) => EventBackend::Cuda(cuda::Event::new(c, flags.raw())?),
            // `blocking_sync` changes how a CUDA thread waits; CPU-backend waits always block.
            ContextBackend::Cpu(c) => EventBackend::Cpu(c.create_event(cpu::EventOptions {
                name: None,
                timing: !flags.disable_timing,
            })),
        };
        Ok(Event {
            ctx: ctx.clone(),
            flags,
            backend,
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

    /// The backend value, for the crate's dispatch.
    pub(crate) fn kind(&self) -> &EventBackend {
        &self.backend
    }

    /// The raw handle, for interop; `None` on the CPU backend. It stays owned by this
    /// `Event`.
    pub fn handle(&self) -> Option<sys::CUevent> {
        match &self.backend {
            EventBackend::Cuda(e) => Some(e.raw()),
            EventBackend::Cpu(_) => None,
        }
    }

    /// Whether all work before the most recent record has completed (`true` if never
    /// recorded, as in CUDA).
    pub fn query(&self) -> Result<bool> {
        match &self.backend {
            EventBackend::Cuda(e) => BackendEvent::is_complete(e),
            EventBackend::Cpu(e) => BackendEvent::is_complete(e),
        }
    }

    /// Blocks until the work before the most recent record has completed. NCCL
    /// communication before the record that failed (its communicator aborted by the
    /// watchdog) is reported as [`Error::Communication`].
    pub fn synchronize(&self) -> Result<()> {
        match &self.backend {
            EventBackend::Cuda(e) => {
                let synced = BackendEvent::synchronize(e);
                match crate::nccl::failure_after_event(e.raw() as usize) {
                    Some(failure) => Err(failure.into()),
                    None => synced,
                }
            }
            EventBackend::Cpu(e) => BackendEvent::synchronize(e),
        }
    }

    /// Milliseconds between `start` and `end`: both recorded and complete, both with timing,
    /// both of one context.
    pub fn elapsed_time(start: &Event, end: &Event) -> Result<f32> {
        const CALL: &str = "Event::elapsed_time";
        for e in [start, end] {
            if e.flags.disable_timing {
                return Err(Error::invalid(
                    CALL,
                    "an event was created with `disable_timing`; create both with timing on",
                ));
            }
        }
        if !start.ctx.same_as(&end.ctx) && !start.ctx.shares_memory_with(&end.ctx) {
            return Err(Error::mismatch(
                CALL,
                "the start and end events belong to different contexts",
            ));
        }
        match (&start.backend, &end.backend) {
            (EventBackend::Cuda(s), EventBackend::Cuda(e)) => BackendEvent::elapsed_ms(s, e),
            (EventBackend::Cpu(s), EventBackend::Cpu(e)) => BackendEvent::elapsed_ms(s, e),
            _ => Err(Error::mismatch(
                CALL,
                "one event is a CUDA event and the other a CPU-backend event",
            )),
        }
    }

    /// Milliseconds from `self` to `end`.
    pub fn elapsed_until(&self, end: &Event) -> Result<f32> {
        Event::elapsed_time(self, end)
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("backend", &self.ctx.backend())
            .field("raw", &self.handle())
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
