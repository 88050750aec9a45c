//! Replay fences as stream sequence numbers: what keeps the host away from pinned memory
//! while enqueued work uses it, at no driver call per enqueue.
//!
//! Every stream handle has one [`FenceClock`]. An eager enqueue that touches pinned memory
//! (a graph launch, a copy, a host function) *marks* the clock after the enqueue: the mark
//! is the next number of the handle's sequence, and the memory keeps `(clock, number)` as its
//! fence (in the allocation, never in a guard, so `mem::forget` of a guard skips nothing).
//! The host reaches the memory only after every fence it keeps is *complete*: all work
//! enqueued on that handle before the mark has finished.
//!
//! How a clock learns that a number is complete, cheapest first:
//! - a stream synchronize on the handle (`Stream::synchronize`, `drain`) that succeeds
//!   completes every number marked before it began, at no extra call: a host loop that
//!   synchronizes and then reads its pinned output waits once;
//! - an event recorded to cover the latest mark only when that is needed: before the next
//!   enqueue of any kind on the handle (`Stream::gate`: so that a host access to the memory of
//!   an earlier enqueue does not also wait for later work, and double buffering keeps its
//!   overlap; an enqueue that finds nothing uncovered pays one atomic load), before
//!   the handle begins or joins a capture, before an owned handle is destroyed or lent to
//!   another library, and at a host access that finds its number neither complete nor
//!   recorded (it records then, and waits on that record). A wait uses the earliest record
//!   that covers its number; the clock keeps the last [`RECORDS`] records, each on its own
//!   event (an older one's event is recorded again, so its marks then wait for the newer
//!   record: later, never earlier than their work), and reuses the events of records known
//!   complete.
//!
//! No event is recorded per replay: a launch followed by a synchronize and a host read makes
//! one `cuGraphLaunch` and one `cuStreamSynchronize`, where an event per replay made
//! `cuGraphLaunch`, `cuEventRecord`, `cuStreamSynchronize` and `cuEventSynchronize`. Each
//! record and each wait on a record is a `tracing` event (targets `gpu_pipeline::fence::record`
//! and `gpu_pipeline::fence::wait`), which `tests/tests/gpu_graphs.rs` counts.
//!
//! Soundness rests on one invariant of [`FenceClock`]: **while the clock is locked and a mark
//! is neither complete nor recorded, its handle is live and not capturing**, so a record made
//! then is an eager record on a live stream, after the marked work in its order. It holds
//! because:
//! - marks happen only after eager enqueues, under the handle's gate, so never while the
//!   handle captures through this crate;
//! - every way the handle could stop being live or eager covers all marks first, under the
//!   clock's lock: beginning a capture (`capture::begin`, `begin_to_graph`), joining one
//!   (`Stream::wait_event`, which covers before every wait), destroying an owned handle,
//!   lending it to another library (which may capture it without telling us);
//! - marks are only left uncovered (*lazy*) on a handle an owned `Stream` of this crate keeps
//!   live: a handle borrowed from other code may be destroyed or captured by that code as soon
//!   as our value is gone (or, after `mem::forget`, without our knowing), so its marks are
//!   recorded at once, as before. A `mem::forget`-ed owned `Stream` is never destroyed, so its
//!   handle stays live for the lazy record.
//!
//! What each `mem::forget` leaves, and why it stays sound:
//! - a host slice (`HostView`, `HostViewMut`): its borrow count stays taken, so every later
//!   launch touching the memory is refused; the fences are in the allocation, untouched;
//! - an executable graph, or a `PinnedBuffer`: leaked with what they hold, never freed; the
//!   fences of the replays made stay in the allocation, which other holders wait on;
//! - an owned `Stream`: the handle is never destroyed (nor captured again, except through a
//!   `Stream` over it, whose capture covers first), so a lazy record on it stays eager on a
//!   live handle.
//!
//! Replays of one graph on several streams leave one fence per stream in each allocation (the
//! latest of each); a host access waits for all of them, each through its own stream's clock.
//! A dropped stream has covered its marks with a record, and a record outlives its stream
//! (the driver keeps the event). The CPU backend has no clocks: its pinned memory counts the
//! queued operations that touch it and the host waits for them (`cpu/memory.rs`), with its own
//! race detector, unchanged by this module.
//!
//! When covering fails (the record fails), the clock waits for the stream instead; when that
//! fails too, every mark it could not cover is *lost*: the host never reaches memory fenced
//! by a lost mark again, and such memory is leaked rather than freed.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys;

use super::{Context, Event};

/// How many records a clock keeps apart (each on its own event).
const RECORDS: usize = 4;

/// The numbers of one handle's sequence, without the driver: what was marked, what the
/// event's latest record covers, what is known complete.
///
/// Invariant: `recorded <= marked` and `completed <= marked`; `lost_after`, when set, is at
/// least `covered()` at the time it was set and marks after it are not complete.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sequence {
    /// The last number handed out (0: none yet).
    marked: u64,
    /// The last number the latest record covers.
    recorded: u64,
    /// The last number known complete (a finished wait).
    completed: u64,
    /// Marks above this number could be neither covered nor awaited.
    lost_after: Option<u64>,
}

/// What a wait for one number has to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// It is complete: nothing.
    Done,
    /// It could be neither covered nor awaited.
    Lost,
    /// Wait on a record: the latest covers up to this number.
    Event(u64),
    /// Record now (covering every mark), then wait on that record.
    Record,
}

impl Sequence {
    /// Hands out the next number, for work just enqueued.
    pub(crate) fn mark(&mut self) -> u64 {
        self.marked += 1;
        self.marked
    }

    /// The last number a record or a finished wait covers.
    pub(crate) fn covered(&self) -> u64 {
        self.recorded.max(self.completed)
    }

    /// Whether some mark is neither recorded nor complete.
    pub(crate) fn pending(&self) -> bool {
        self.marked > self.covered()
    }

    /// A record was just made after every mark so far.
    pub(crate) fn recorded_all(&mut self) {
        self.recorded = self.marked;
    }

    /// Every number up to `upto` has completed.
    pub(crate) fn completed_to(&mut self, upto: u64) {
        self.completed = self.completed.max(upto.min(self.marked));
    }

    /// The marks not covered now can be neither covered nor awaited.
    pub(crate) fn lose_pending(&mut self) {
        if self.pending() {
            self.lost_after = Some(
                self.lost_after
                    .map_or(self.covered(), |l| l.min(self.covered())),
            );
        }
    }

    /// What waiting for `number` takes.
    pub(crate) fn plan(&self, number: u64) -> Plan {
        if number <= self.completed {
            Plan::Done
        } else if number <= self.recorded {
            Plan::Event(self.recorded)
        } else if self.lost_after.is_some_and(|after| number > after) {
            Plan::Lost
        } else {
            Plan::Record
        }
    }
}

/// What the clock's lock guards.
#[derive(Debug, Default)]
struct ClockState {
    seq: Sequence,
    /// The records not known complete, oldest first: the last mark each covers, and its
    /// event (recorded once since). The last covers `seq.recorded`.
    records: VecDeque<(u64, Arc<Event>)>,
    /// Events free for the next record (their records are known complete, or there were
    /// none). One is created before the first enqueue that marks, so a record never needs
    /// to create one while work is in flight.
    spare: Vec<Arc<Event>>,
    /// Whether marks may stay uncovered: an owned `Stream` of this crate keeps the handle
    /// live, and no other library holds it.
    lazy: bool,
}

/// One stream handle's fence sequence (see the module).
///
/// Invariant: `raw` is a stream handle of `ctx`; while the state is locked and
/// `seq.pending()`, the handle is live and not capturing (the module's argument).
pub(crate) struct FenceClock {
    ctx: Arc<Context>,
    raw: sys::CUstream,
    state: Mutex<ClockState>,
    /// A hint, without the lock: whether a lazy mark may be uncovered (set by `mark`, cleared
    /// when nothing is pending). Only where records are made depends on it, never soundness.
    uncovered: AtomicBool,
}

// SAFETY: the raw handle is passed to the driver only under the invariant above (thread-safe
// driver calls); the rest is behind a mutex.
unsafe impl Send for FenceClock {}
// SAFETY: as above.
unsafe impl Sync for FenceClock {}

impl std::fmt::Debug for FenceClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Tried, never waited for: a `Debug` call under the lock must not deadlock.
        let seq = self.state.try_lock().map(|state| state.seq).ok();
        f.debug_struct("FenceClock")
            .field("raw", &self.raw)
            .field("seq", &seq)
            .finish()
    }
}

/// A fence: a number of one clock's sequence.
#[derive(Debug, Clone)]
pub(crate) struct Fence {
    clock: Arc<FenceClock>,
    number: u64,
}

impl FenceClock {
    /// The clock of handle `raw` of `ctx`; marks are covered at once until [`set_lazy`]
    /// says an owned stream keeps the handle live.
    ///
    /// [`set_lazy`]: FenceClock::set_lazy
    pub(crate) fn new(ctx: &Arc<Context>, raw: sys::CUstream) -> FenceClock {
        FenceClock {
            ctx: ctx.clone(),
            raw,
            state: Mutex::new(ClockState::default()),
            uncovered: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ClockState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Updates the hint after the state changed (under the lock).
    fn note(&self, state: &ClockState) {
        let uncovered = state.lazy && state.seq.pending() && state.seq.lost_after.is_none();
        self.uncovered.store(uncovered, Ordering::Release);
    }

    /// An event for the next record: a spare one, a new one while fewer than [`RECORDS`]
    /// are kept, else the oldest record's (whose marks then wait for the new record, which
    /// follows them in the stream's order).
    fn take_event(&self, state: &mut ClockState) -> Result<Arc<Event>> {
        if let Some(event) = state.spare.pop() {
            return Ok(event);
        }
        if state.records.len() < RECORDS {
            match Event::new(&self.ctx, sys::CU_EVENT_DISABLE_TIMING) {
                Ok(event) => return Ok(Arc::new(event)),
                Err(e) if state.records.is_empty() => return Err(e),
                // Creating failed, but a kept record's event can be recorded again.
                Err(_) => {}
            }
        }
        match state.records.pop_front() {
            Some((_, event)) => Ok(event),
            None => Err(Error::invalid(
                "FenceClock",
                "no event to record a fence on",
            )),
        }
    }

    /// Moves the events of records known complete to the spares.
    fn prune(state: &mut ClockState) {
        while let Some((upto, _)) = state.records.front()
            && *upto <= state.seq.completed
        {
            if let Some((_, event)) = state.records.pop_front() {
                state.spare.push(event);
            }
        }
    }

    /// Records an event on the handle after everything enqueued so far and notes that it
    /// covers every mark.
    fn record(&self, state: &mut ClockState) -> Result<()> {
        let event = self.take_event(state)?;
        let recorded = self.record_event(&event);
        if let Err(e) = recorded {
            state.spare.push(event);
            return Err(e);
        }
        state.records.push_back((state.seq.marked, event));
        state.seq.recorded_all();
        // Counted by tests (a `tracing` event, free without a subscriber).
        tracing::trace!(target: "gpu_pipeline::fence::record", upto = state.seq.marked);
        Ok(())
    }

    fn record_event(&self, event: &Event) -> Result<()> {
        let d = self.ctx.bind()?;
        // SAFETY: a live event of the handle's context, and a live handle that is not
        // capturing: every caller either holds a `Stream` over the handle outside a capture
        // (an eager enqueue's mark or prepare under the gate, a capture about to begin or
        // join under the exclusive gate, a destroy or lend before the handle goes) or holds
        // the lock with a mark pending on a lazy clock (the type's invariant).
        check("cuEventRecord", unsafe {
            (d.cuEventRecord)(event.raw(), self.raw)
        })
    }

    /// Covers every pending mark with a record; when recording fails, waits for the stream;
    /// when that fails too, the pending marks are lost (and the error returned).
    fn cover(&self, state: &mut ClockState) -> Result<()> {
        let covered = self.cover_unnoted(state);
        self.note(state);
        covered
    }

    fn cover_unnoted(&self, state: &mut ClockState) -> Result<()> {
        if !state.seq.pending() {
            return Ok(());
        }
        let Err(e) = self.record(state) else {
            return Ok(());
        };
        tracing::warn!(error = %e, "recording a pinned-memory fence failed; waiting for the stream instead");
        let upto = state.seq.marked;
        let drained = self.ctx.bind().and_then(|d| {
            // SAFETY: a live handle that is not capturing, as for the record above.
            check("cuStreamSynchronize", unsafe {
                (d.cuStreamSynchronize)(self.raw)
            })
        });
        match drained {
            Ok(()) => {
                state.seq.completed_to(upto);
                Self::prune(state);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "pinned memory is lost: its work can be neither fenced nor awaited");
                state.seq.lose_pending();
                Err(e)
            }
        }
    }

    /// Before an eager enqueue that touches pinned memory (under the handle's gate): makes
    /// sure an event exists, so that [`mark`](FenceClock::mark) cannot fail, and covers the
    /// marks of earlier enqueues, so that a host access to their memory waits for them and
    /// not for this one.
    pub(crate) fn prepare(&self) -> Result<()> {
        let mut state = self.lock();
        if state.spare.is_empty() && state.records.is_empty() {
            let event = Event::new(&self.ctx, sys::CU_EVENT_DISABLE_TIMING)?;
            state.spare.push(Arc::new(event));
        }
        if state.seq.pending() {
            self.record(&mut state)?;
            self.note(&state);
        }
        Ok(())
    }

    /// After an eager enqueue that touches pinned memory, under the handle's gate: the fence
    /// that memory keeps. On a lazy clock no driver call is made; otherwise an event is
    /// recorded now, and when that fails the stream is waited for instead. `None` when even
    /// that failed: the memory must be marked lost.
    pub(crate) fn mark(self: &Arc<FenceClock>) -> Option<Fence> {
        let mut state = self.lock();
        let number = state.seq.mark();
        if !state.lazy && self.cover(&mut state).is_err() {
            return None;
        }
        self.note(&state);
        Some(Fence {
            clock: self.clone(),
            number,
        })
    }

    /// Covers every mark, for a handle about to begin or join a capture, be destroyed or be
    /// lent: from then on it may not be live or eager for a later record. Failures are
    /// logged and lose the marks (see `cover`).
    pub(crate) fn cover_all(&self) {
        let _ = self.cover(&mut self.lock());
    }

    /// Covers the lazy marks, if the hint says some may be uncovered: at the start of every
    /// enqueue on the handle (under its shared gate, so outside a capture), so that the
    /// records follow the marked work directly and a wait for it waits for nothing later.
    #[inline]
    pub(crate) fn cover_before_enqueue(&self) {
        if self.uncovered.load(Ordering::Acquire) {
            self.cover_all();
        }
    }

    /// Marks may stay uncovered (`true`: an owned `Stream` keeps the handle live) or not
    /// (`false`: covers them all first, for a handle being destroyed or lent).
    pub(crate) fn set_lazy(&self, lazy: bool) {
        let mut state = self.lock();
        if !lazy {
            let _ = self.cover(&mut state);
        }
        state.lazy = lazy;
        self.note(&state);
    }

    /// The last number marked, before a stream synchronize, for [`synchronized`].
    ///
    /// [`synchronized`]: FenceClock::synchronized
    pub(crate) fn snapshot(&self) -> u64 {
        self.lock().seq.marked
    }

    /// A stream synchronize that began after `snapshot` was taken has succeeded.
    pub(crate) fn synchronized(&self, snapshot: u64) {
        let mut state = self.lock();
        state.seq.completed_to(snapshot);
        Self::prune(&mut state);
        self.note(&state);
    }

    /// Every number up to `upto` has completed (a finished wait on a record).
    fn completed(&self, upto: u64) {
        self.synchronized(upto);
    }
}

impl Fence {
    /// Whether this fence and `other` are of one clock.
    pub(crate) fn same_clock(&self, other: &Fence) -> bool {
        Arc::ptr_eq(&self.clock, &other.clock)
    }

    /// Becomes the later of itself and `other`, a fence of the same clock (the clock's count
    /// untouched: a replay's fence costs no atomic increment and decrement).
    pub(crate) fn advance_to(&mut self, other: &Fence) {
        debug_assert!(self.same_clock(other));
        self.number = self.number.max(other.number);
    }

    /// The record to wait on, or `None` when the fence is complete. Records one when
    /// nothing covers the fence yet (the clock's invariant makes that an eager record).
    fn event_to_wait(&self) -> Result<Option<(Arc<Event>, u64)>> {
        let mut state = self.clock.lock();
        let plan = match state.seq.plan(self.number) {
            // Only a lazy clock leaves marks uncovered (an eager one covers them at once or
            // loses them), so only there does the invariant promise a live, eager handle.
            Plan::Record if !state.lazy => Plan::Lost,
            Plan::Record => {
                self.clock.cover(&mut state)?;
                state.seq.plan(self.number)
            }
            plan => plan,
        };
        match plan {
            Plan::Done => Ok(None),
            Plan::Lost | Plan::Record => Err(lost_error()),
            // The earliest record that covers the number (the latest covers every recorded
            // one, so there is one).
            Plan::Event(_) => match state.records.iter().find(|(upto, _)| *upto >= self.number) {
                Some((upto, event)) => Ok(Some((event.clone(), *upto))),
                None => Err(lost_error()),
            },
        }
    }

    /// Blocks until the fence is complete. An asynchronous fault of the work is returned.
    pub(crate) fn wait(&self) -> Result<()> {
        let Some((event, upto)) = self.event_to_wait()? else {
            return Ok(());
        };
        // Waited on without the lock: the event may be recorded again meanwhile (for a later
        // record), which only makes the wait cover more.
        tracing::trace!(target: "gpu_pipeline::fence::wait", upto);
        event.synchronize()?;
        self.clock.completed(upto);
        Ok(())
    }

    /// Whether the fence is complete, without blocking.
    pub(crate) fn is_complete(&self) -> Result<bool> {
        let Some((event, upto)) = self.event_to_wait()? else {
            return Ok(true);
        };
        if !event.query()? {
            return Ok(false);
        }
        self.clock.completed(upto);
        Ok(true)
    }
}

fn lost_error() -> Error {
    Error::invalid(
        "PinnedBuffer",
        "work touching this pinned memory could not be fenced or awaited, so the host may not \
         access it any more",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mark_is_the_next_number_and_starts_pending() {
        let mut seq = Sequence::default();
        assert!(!seq.pending());
        assert_eq!(seq.mark(), 1);
        assert_eq!(seq.mark(), 2);
        assert!(seq.pending());
        assert_eq!(seq.plan(1), Plan::Record);
        assert_eq!(seq.plan(2), Plan::Record);
    }

    #[test]
    fn a_record_covers_every_earlier_mark_and_no_later_one() {
        let mut seq = Sequence::default();
        let first = seq.mark();
        let second = seq.mark();
        seq.recorded_all();
        assert!(!seq.pending());
        assert_eq!(seq.plan(first), Plan::Event(2));
        assert_eq!(seq.plan(second), Plan::Event(2));
        let third = seq.mark();
        assert!(seq.pending());
        assert_eq!(seq.plan(third), Plan::Record);
        // The earlier marks still wait on the record that covers them.
        assert_eq!(seq.plan(second), Plan::Event(2));
    }

    #[test]
    fn a_finished_wait_completes_up_to_its_snapshot_only() {
        let mut seq = Sequence::default();
        let first = seq.mark();
        let snapshot = seq.marked;
        let second = seq.mark();
        seq.completed_to(snapshot);
        assert_eq!(seq.plan(first), Plan::Done);
        assert_eq!(seq.plan(second), Plan::Record);
        // A completion never runs ahead of the marks.
        seq.completed_to(u64::MAX);
        assert_eq!(seq.completed, seq.marked);
        assert_eq!(seq.plan(second), Plan::Done);
        assert!(!seq.pending());
    }

    #[test]
    fn completion_never_moves_back() {
        let mut seq = Sequence::default();
        seq.mark();
        seq.mark();
        seq.completed_to(2);
        seq.completed_to(1);
        assert_eq!(seq.plan(2), Plan::Done);
    }

    #[test]
    fn lost_marks_stay_lost_and_covered_ones_stay_reachable() {
        let mut seq = Sequence::default();
        let covered = seq.mark();
        seq.recorded_all();
        let lost = seq.mark();
        seq.lose_pending();
        assert_eq!(seq.plan(covered), Plan::Event(1));
        assert_eq!(seq.plan(lost), Plan::Lost);
        // A later mark, recorded, is reachable again; the lost one is not.
        let later = seq.mark();
        seq.recorded_all();
        assert_eq!(seq.plan(later), Plan::Event(later));
        assert_eq!(seq.plan(lost), Plan::Event(later));
        // (A record after a loss covers the lost mark too: the record follows it in
        // the stream's order. The pinned memory of a lost mark is marked lost on its own.)
    }

    #[test]
    fn losing_nothing_pending_loses_nothing() {
        let mut seq = Sequence::default();
        seq.mark();
        seq.recorded_all();
        seq.lose_pending();
        assert_eq!(seq.lost_after, None);
        assert_eq!(seq.plan(1), Plan::Event(1));
    }
}
