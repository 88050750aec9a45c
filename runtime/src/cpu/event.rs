//! Events: points in a stream that other streams and the host can wait on and time.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use super::capture::CaptureSession;
use super::clock::VectorClock;
use super::shared::{ContextShared, lock, on_worker_thread, wait};
use crate::vocab::fault::CpuFault;

/// Options of a new event.
#[derive(Clone, Debug)]
pub(crate) struct EventOptions {
    /// Name used in reports; `event #<id>` when absent.
    pub(crate) name: Option<Cow<'static, str>>,
    /// Whether `elapsed_time` may use this event (CUDA's default; `false` is
    /// `CU_EVENT_DISABLE_TIMING`).
    pub(crate) timing: bool,
}

impl Default for EventOptions {
    fn default() -> Self {
        EventOptions {
            name: None,
            timing: true,
        }
    }
}

/// A recorded point in a stream: completes (with a timestamp) when the stream reaches it.
#[derive(Debug, Default)]
pub(super) struct RecordPoint {
    state: Mutex<PointState>,
    cond: Condvar,
}

#[derive(Debug, Default)]
struct PointState {
    reached: Option<Instant>,
    /// Threads blocked in `wait`; completing notifies only when there are some, since a
    /// futex notify is a syscall even with nobody waiting.
    waiters: usize,
}

impl RecordPoint {
    /// Marks the point reached now; called by the stream's worker.
    pub(super) fn complete(&self) {
        let mut state = lock(&self.state);
        state.reached = Some(Instant::now());
        let waiters = state.waiters > 0;
        drop(state);
        if waiters {
            self.cond.notify_all();
        }
    }

    /// When the point was reached, if it was.
    pub(super) fn reached_at(&self) -> Option<Instant> {
        lock(&self.state).reached
    }

    /// Blocks until the point is reached.
    pub(super) fn wait(&self) {
        let mut state = lock(&self.state);
        state.waiters += 1;
        while state.reached.is_none() {
            state = wait(&self.cond, state);
        }
        state.waiters -= 1;
    }
}

/// What an event's most recent `record` was.
#[derive(Clone, Debug, Default)]
pub(super) enum LatestRecord {
    /// Never recorded: waiting on it is a no-op, as in CUDA.
    #[default]
    Never,
    /// Recorded in eager execution; `clock` is set in checked mode.
    Eager {
        point: Arc<RecordPoint>,
        clock: Option<VectorClock>,
    },
    /// Recorded on a capturing stream: the capture's frontier on that stream at the time.
    Captured {
        session: Arc<CaptureSession>,
        frontier: Vec<usize>,
    },
}

/// The part of an event that streams share.
#[derive(Debug)]
pub(super) struct EventShared {
    pub(super) ctx: Arc<ContextShared>,
    pub(super) name: Arc<str>,
    pub(super) timing: bool,
    pub(super) latest: Mutex<LatestRecord>,
}

/// A host-backend event: record it on a stream, then wait on it from other streams, query or
/// synchronize it from the host, or time between two of them.
#[derive(Debug)]
pub(crate) struct Event {
    pub(super) shared: Arc<EventShared>,
}

impl Event {
    pub(super) fn new(ctx: Arc<ContextShared>, options: EventOptions) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = match options.name {
            Some(name) => Arc::from(name.as_ref()),
            None => Arc::from(format!("event #{}", NEXT.fetch_add(1, Ordering::Relaxed))),
        };
        Event {
            shared: Arc::new(EventShared {
                ctx,
                name,
                timing: options.timing,
                latest: Mutex::new(LatestRecord::Never),
            }),
        }
    }

    fn latest(&self) -> LatestRecord {
        lock(&self.shared.latest).clone()
    }

    /// Whether the recorded point has been reached (`true` if never recorded, `false` if last
    /// recorded inside a capture, which has no eager point). A `true` answer orders later host
    /// accesses after the recorded work, for the race detector.
    pub(crate) fn query(&self) -> bool {
        match self.latest() {
            LatestRecord::Never => true,
            LatestRecord::Captured { .. } => false,
            LatestRecord::Eager { point, clock } => {
                let reached = point.reached_at().is_some();
                if reached && let Some(clock) = clock {
                    self.shared.ctx.detector().host_join(&clock);
                }
                reached
            }
        }
    }

    /// Blocks until the recorded point is reached (returns at once if never recorded).
    pub(crate) fn synchronize(&self) -> Result<(), CpuFault> {
        if on_worker_thread() {
            return Err(CpuFault::BlockingCallInsideOp {
                operation: "event synchronize",
            });
        }
        match self.latest() {
            LatestRecord::Never => Ok(()),
            LatestRecord::Captured { .. } => Err(CpuFault::EventInCapture {
                event: self.shared.name.clone(),
                operation: "synchronize",
            }),
            LatestRecord::Eager { point, clock } => {
                point.wait();
                if let Some(clock) = clock {
                    self.shared.ctx.detector().host_join(&clock);
                }
                Ok(())
            }
        }
    }

    /// Milliseconds from `start`'s recorded point to `end`'s (negative if `end` came first).
    pub(crate) fn elapsed_time(start: &Event, end: &Event) -> Result<f32, CpuFault> {
        let from = start.reached_at()?;
        let to = end.reached_at()?;
        let ms = match to.checked_duration_since(from) {
            Some(forward) => forward.as_secs_f64() * 1e3,
            None => -(from.duration_since(to).as_secs_f64() * 1e3),
        };
        // CUDA reports f32 milliseconds; the precision loss is the API's.
        Ok(ms as f32)
    }

    fn reached_at(&self) -> Result<Instant, CpuFault> {
        let event = || self.shared.name.clone();
        if !self.shared.timing {
            return Err(CpuFault::EventTimingDisabled { event: event() });
        }
        match self.latest() {
            LatestRecord::Never => Err(CpuFault::EventNotRecorded { event: event() }),
            LatestRecord::Captured { .. } => Err(CpuFault::EventInCapture {
                event: event(),
                operation: "elapsed_time",
            }),
            LatestRecord::Eager { point, .. } => point
                .reached_at()
                .ok_or_else(|| CpuFault::EventNotReady { event: event() }),
        }
    }
}
