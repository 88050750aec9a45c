//! Streams: in-order queues, each served by its own worker thread.
//!
//! Enqueuing takes the stream's lock once, pushes onto a `VecDeque` and signals a condvar; the
//! worker pops one item at a time and runs it outside the lock, so the enqueuing thread never
//! waits for work. Every ordering decision (capture, race-detector clocks) is made under the
//! stream's lock at enqueue time, so it follows enqueue order exactly.
//!
//! Lock order, to stay deadlock-free: stream state, then event state, then capture session,
//! then the context's detector. No lock is held while user work runs or while blocking.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};

use super::capture::CaptureSession;
use super::context::ContextShared;
use super::error::{HostFault, OpSite};
use super::event::{HostEvent, LatestRecord, RecordPoint};
use super::graph::{ExecPlan, HostGraph};
use super::op::HostOp;
use super::{clock::Timeline, lock, wait};

thread_local! {
    /// Set on stream worker threads: blocking calls there could wait on themselves.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is a stream worker (running some stream's operations).
pub(crate) fn on_worker_thread() -> bool {
    ON_WORKER.with(Cell::get)
}

/// Options of a new stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamOptions {
    /// Name used in reports and race messages; `stream #<id>` when absent.
    pub(crate) name: Option<Cow<'static, str>>,
    /// Priority, clamped to the context's range; recorded and readable, scheduling is best
    /// effort (each stream has its own thread anyway).
    pub(crate) priority: i32,
    /// CUDA's non-blocking flag; recorded only, as there is no legacy default stream here.
    pub(crate) non_blocking: bool,
}

/// One queued item.
enum Item {
    Op(HostOp),
    Record(Arc<RecordPoint>),
    Wait(Arc<RecordPoint>),
    Replay(Arc<ExecPlan>),
}

/// Mutable stream state, under the stream's lock.
#[derive(Default)]
struct StreamState {
    queue: VecDeque<Item>,
    submitted: u64,
    completed: u64,
    /// The first fault since the last synchronize.
    fault: Option<HostFault>,
    capture: Option<Arc<CaptureSession>>,
    closing: bool,
    /// Whether the worker sleeps on `work_ready`; a futex notify is a syscall even with no
    /// waiter, so enqueues only notify a sleeping worker.
    worker_idle: bool,
    /// Threads sleeping on `progress`, for the same reason.
    progress_waiters: usize,
}

impl StreamState {
    /// Queues `item`; returns whether the worker must be woken.
    #[must_use]
    fn push(&mut self, item: Item) -> bool {
        self.queue.push_back(item);
        self.submitted += 1;
        self.worker_idle
    }

    fn note(&mut self, fault: HostFault) {
        if self.fault.is_none() {
            self.fault = Some(fault);
        } else {
            tracing::debug!(%fault, "host stream fault after an unreported one");
        }
    }

    /// The capture this stream takes part in, leaving one that another stream ended.
    fn active_capture(&mut self) -> Option<Arc<CaptureSession>> {
        let session = self.capture.as_ref()?;
        if session.is_ended() {
            self.capture = None;
            return None;
        }
        Some(session.clone())
    }
}

/// The part of a stream that its worker, its events and capture sessions share.
pub(super) struct StreamShared {
    pub(super) ctx: Arc<ContextShared>,
    pub(super) id: u64,
    pub(super) timeline: Timeline,
    pub(super) name: Arc<str>,
    pub(super) priority: i32,
    pub(super) non_blocking: bool,
    state: Mutex<StreamState>,
    /// Signalled when work is queued to an idle worker or the stream closes.
    work_ready: Condvar,
    /// Signalled when an item completes while someone synchronizes.
    progress: Condvar,
}

impl std::fmt::Debug for StreamShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamShared")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("timeline", &self.timeline)
            .finish_non_exhaustive()
    }
}

/// A host-backend stream: an in-order queue of operations run by one worker thread.
///
/// Dropping it lets the worker finish everything already queued and waits for that (unless
/// dropped from inside an operation, where waiting could deadlock: the worker then finishes
/// in the background). Faults not yet reported by a synchronize are logged, not lost silently.
#[derive(Debug)]
pub(crate) struct HostStream {
    pub(super) shared: Arc<StreamShared>,
    worker: Option<JoinHandle<()>>,
}

impl HostStream {
    pub(super) fn spawn(
        ctx: Arc<ContextShared>,
        timeline: Timeline,
        options: StreamOptions,
        priority: i32,
    ) -> Result<Self, HostFault> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = match options.name {
            Some(name) => Arc::from(name.as_ref()),
            None => Arc::from(format!("stream #{id}")),
        };
        let shared = Arc::new(StreamShared {
            ctx,
            id,
            timeline,
            name,
            priority,
            non_blocking: options.non_blocking,
            state: Mutex::new(StreamState::default()),
            work_ready: Condvar::new(),
            progress: Condvar::new(),
        });
        let worker_shared = shared.clone();
        let worker = thread::Builder::new()
            .name(format!("gpu-pipeline-host-stream-{id}"))
            .spawn(move || worker_shared.serve())
            .map_err(|error| HostFault::WorkerSpawn {
                stream: shared.name.clone(),
                message: error.to_string(),
            })?;
        Ok(HostStream {
            shared,
            worker: Some(worker),
        })
    }

    /// A process-unique id.
    pub(crate) fn id(&self) -> u64 {
        self.shared.id
    }

    /// The stream's name.
    pub(crate) fn name(&self) -> &str {
        &self.shared.name
    }

    /// The priority it was created with (after clamping).
    pub(crate) fn priority(&self) -> i32 {
        self.shared.priority
    }

    /// Whether it was created non-blocking.
    pub(crate) fn is_non_blocking(&self) -> bool {
        self.shared.non_blocking
    }

    /// Queues `op` after everything already queued (or captures it). Errors are immediate
    /// misuse only; the op's own failure surfaces at the next [`HostStream::synchronize`].
    pub(crate) fn enqueue(&self, op: HostOp) -> Result<(), HostFault> {
        self.shared.enqueue(op).map(drop)
    }

    /// [`HostStream::enqueue`], saying whether the op was captured (`true`) or queued to run
    /// (`false`), decided atomically with the enqueue: what code that fences eager work needs.
    pub(crate) fn enqueue_tracked(&self, op: HostOp) -> Result<bool, HostFault> {
        self.shared.enqueue(op)
    }

    /// Records `event` here: it completes when the work queued so far has run.
    pub(crate) fn record(&self, event: &HostEvent) -> Result<(), HostFault> {
        self.shared.record(event)
    }

    /// Work queued here later waits until `event`'s recorded point completed. A never-recorded
    /// event is a no-op; an event recorded on a capturing stream makes this stream join it.
    pub(crate) fn wait(&self, event: &HostEvent) -> Result<(), HostFault> {
        self.shared.wait(event)
    }

    /// Work queued here later waits for the work queued on `other` so far.
    pub(crate) fn wait_stream(&self, other: &HostStream) -> Result<(), HostFault> {
        let event = HostEvent::new(
            self.shared.ctx.clone(),
            super::EventOptions {
                name: Some(Cow::Owned(format!("{} -> {}", other.name(), self.name()))),
                timing: false,
            },
        );
        other.record(&event)?;
        self.wait(&event)
    }

    /// Blocks until everything queued so far has run; returns the first fault since the last
    /// synchronize (an op's error or panic, or a race report).
    pub(crate) fn synchronize(&self) -> Result<(), HostFault> {
        self.shared.synchronize()
    }

    /// Whether everything queued so far has run. A `true` answer orders later host accesses
    /// after that work, for the race detector. On a capturing stream it answers for the eager
    /// work queued before the capture (captured work never runs on the stream).
    pub(crate) fn query(&self) -> bool {
        self.shared.query()
    }

    /// Starts capturing: later work on this stream (and streams that join through events) is
    /// recorded into a graph instead of running.
    pub(crate) fn begin_capture(&self) -> Result<(), HostFault> {
        let mut state = lock(&self.shared.state);
        if state.active_capture().is_some() {
            return Err(HostFault::AlreadyCapturing {
                stream: self.shared.name.clone(),
            });
        }
        state.capture = Some(CaptureSession::begin(&self.shared));
        Ok(())
    }

    /// Ends the capture begun on this stream and returns its graph. Every stream that joined
    /// leaves the capture, whether or not the graph is valid.
    pub(crate) fn end_capture(&self) -> Result<HostGraph, HostFault> {
        let stream = self.shared.name.clone();
        let session = {
            let mut state = lock(&self.shared.state);
            let session = state
                .active_capture()
                .ok_or_else(|| HostFault::NotCapturing {
                    stream: stream.clone(),
                })?;
            if session.origin != self.shared.timeline {
                return Err(HostFault::NotCaptureOrigin {
                    stream,
                    origin: session.origin_name.clone(),
                });
            }
            state.capture = None;
            session
        };
        let (graph, members) = session.end();
        for member in members.iter().filter_map(std::sync::Weak::upgrade) {
            let mut state = lock(&member.state);
            if state
                .capture
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &session))
            {
                state.capture = None;
            }
        }
        graph
    }

    /// Whether this stream is capturing (as origin or joined).
    pub(crate) fn is_capturing(&self) -> bool {
        lock(&self.shared.state).active_capture().is_some()
    }
}

impl StreamShared {
    /// Queues or captures `op`; `Ok(true)` when captured.
    fn enqueue(&self, mut op: HostOp) -> Result<bool, HostFault> {
        // Dropped after the lock is released unless captured: a drop may wait on streams.
        let graph_only = std::mem::take(&mut op.graph_only);
        let mut state = lock(&self.state);
        if let Some(session) = state.active_capture() {
            op.graph_only = graph_only;
            return session.add_op(self.timeline, op).map(|()| true);
        }
        if self.ctx.checked {
            let label: Arc<str> = Arc::from(op.label());
            let accesses = op.effective_accesses();
            let races = self.ctx.detector().stream_op(
                self.timeline,
                &self.name,
                [(&label, accesses.as_slice())],
            );
            for race in races {
                state.note(HostFault::Race(Box::new(race)));
            }
        }
        let wake = state.push(Item::Op(op));
        self.wake(wake);
        drop(state);
        drop(graph_only);
        Ok(false)
    }

    /// Queues (or captures) one replay of `plan`; `Ok(true)` when captured.
    pub(super) fn launch(&self, plan: &Arc<ExecPlan>) -> Result<bool, HostFault> {
        let mut state = lock(&self.state);
        if let Some(session) = state.active_capture() {
            let nodes: Vec<_> = plan.nodes.iter().map(|n| n.node.clone()).collect();
            return session.add_graph(self.timeline, &nodes).map(|()| true);
        }
        if self.ctx.checked {
            let mut detector = self.ctx.detector();
            let nodes = plan.nodes.iter();
            let mut races = detector.stream_op(
                self.timeline,
                &self.name,
                nodes.map(|n| (&n.node.label, n.accesses.as_slice())),
            );
            if !plan.intra_reported.swap(true, Ordering::Relaxed) {
                for race in plan.intra_races() {
                    let site = |i: usize| OpSite {
                        op: plan.nodes[i].node.label.clone(),
                        stream: plan.nodes[i].node.captured_on.clone(),
                    };
                    let (earlier, later) = (site(race.earlier), site(race.later));
                    races.push(detector.report(race.buffer, race.hazard, earlier, later));
                }
            }
            drop(detector);
            for race in races {
                state.note(HostFault::Race(Box::new(race)));
            }
        }
        let wake = state.push(Item::Replay(plan.clone()));
        self.wake(wake);
        Ok(false)
    }

    fn record(self: &Arc<Self>, event: &HostEvent) -> Result<(), HostFault> {
        self.check_same_context(event)?;
        let mut state = lock(&self.state);
        if let Some(session) = state.active_capture() {
            let frontier = session.frontier(self.timeline);
            *lock(&event.shared.latest) = LatestRecord::Captured { session, frontier };
            return Ok(());
        }
        let point = Arc::new(RecordPoint::default());
        let clock = self
            .ctx
            .checked
            .then(|| self.ctx.detector().record(self.timeline));
        *lock(&event.shared.latest) = LatestRecord::Eager {
            point: point.clone(),
            clock,
        };
        let wake = state.push(Item::Record(point));
        self.wake(wake);
        Ok(())
    }

    fn wait(self: &Arc<Self>, event: &HostEvent) -> Result<(), HostFault> {
        self.check_same_context(event)?;
        let mut state = lock(&self.state);
        let latest = lock(&event.shared.latest).clone();
        let capture = state.active_capture();
        match (latest, capture) {
            (LatestRecord::Never, _) => Ok(()),
            (LatestRecord::Eager { .. }, Some(mine)) => {
                Err(self.isolation(&mine, event, "outside any capture"))
            }
            (LatestRecord::Eager { point, clock }, None) => {
                if let Some(clock) = clock {
                    self.ctx.detector().wait(self.timeline, &clock);
                }
                // A point already reached needs no queue item: the order is already there.
                if point.reached_at().is_none() {
                    let wake = state.push(Item::Wait(point));
                    self.wake(wake);
                }
                Ok(())
            }
            (LatestRecord::Captured { session, frontier }, Some(mine)) => {
                if !Arc::ptr_eq(&session, &mine) {
                    return Err(self.isolation(&mine, event, "in another capture"));
                }
                session.join(self, &frontier);
                Ok(())
            }
            (LatestRecord::Captured { session, frontier }, None) => {
                if session.is_ended() {
                    return Err(HostFault::EventInCapture {
                        event: event.shared.name.clone(),
                        operation: "wait",
                    });
                }
                session.join(self, &frontier);
                state.capture = Some(session);
                Ok(())
            }
        }
    }

    fn isolation(
        &self,
        session: &CaptureSession,
        event: &HostEvent,
        where_recorded: &'static str,
    ) -> HostFault {
        let fault = HostFault::CaptureIsolation {
            stream: self.name.clone(),
            event: event.shared.name.clone(),
            where_recorded,
        };
        session.invalidate(fault.clone());
        fault
    }

    fn check_same_context(&self, event: &HostEvent) -> Result<(), HostFault> {
        if Arc::ptr_eq(&self.ctx, &event.shared.ctx) {
            Ok(())
        } else {
            Err(HostFault::ForeignEvent {
                stream: self.name.clone(),
                event: event.shared.name.clone(),
            })
        }
    }

    pub(super) fn synchronize(&self) -> Result<(), HostFault> {
        if on_worker_thread() {
            return Err(HostFault::BlockingCallInsideOp {
                operation: "stream synchronize",
            });
        }
        let mut state = lock(&self.state);
        if let Some(session) = state.active_capture() {
            let fault = HostFault::NotAllowedInCapture {
                stream: self.name.clone(),
                operation: "synchronize",
            };
            session.invalidate(fault.clone());
            return Err(fault);
        }
        let target = state.submitted;
        let clock = self
            .ctx
            .checked
            .then(|| self.ctx.detector().stream_clock(self.timeline));
        state.progress_waiters += 1;
        while state.completed < target {
            state = wait(&self.progress, state);
        }
        state.progress_waiters -= 1;
        let fault = state.fault.take();
        drop(state);
        if let Some(clock) = clock {
            self.ctx.detector().host_join(&clock);
        }
        fault.map_or(Ok(()), Err)
    }

    /// Blocks until everything queued so far has run, without taking the fault a later
    /// synchronize reports, and without touching a capture (its captured work never runs
    /// here; the eager work queued before it is waited for).
    pub(super) fn drain(&self) {
        let mut state = lock(&self.state);
        let target = state.submitted;
        state.progress_waiters += 1;
        while state.completed < target {
            state = wait(&self.progress, state);
        }
        state.progress_waiters -= 1;
    }

    fn query(&self) -> bool {
        let state = lock(&self.state);
        let complete = state.completed == state.submitted;
        if complete && self.ctx.checked {
            let mut detector = self.ctx.detector();
            let clock = detector.stream_clock(self.timeline);
            detector.host_join(&clock);
        }
        complete
    }

    /// The worker: runs queued items in order until the stream is closed and drained.
    fn serve(&self) {
        ON_WORKER.with(|flag| flag.set(true));
        loop {
            let item = {
                let mut state = lock(&self.state);
                loop {
                    if let Some(item) = state.queue.pop_front() {
                        break item;
                    }
                    if state.closing {
                        return;
                    }
                    state.worker_idle = true;
                    state = wait(&self.work_ready, state);
                    state.worker_idle = false;
                }
            };
            let fault = self.execute(item);
            let mut state = lock(&self.state);
            state.completed += 1;
            if let Some(fault) = fault {
                state.note(fault);
            }
            let waiters = state.progress_waiters > 0;
            drop(state);
            if waiters {
                self.progress.notify_all();
            }
        }
    }

    fn wake(&self, worker_idle: bool) {
        if worker_idle {
            self.work_ready.notify_one();
        }
    }

    fn execute(&self, item: Item) -> Option<HostFault> {
        match item {
            Item::Op(op) => op
                .run()
                .err()
                .map(|(label, failure)| HostFault::from_failure(&self.name, &label, failure)),
            Item::Record(point) => {
                point.complete();
                None
            }
            Item::Wait(point) => {
                point.wait();
                None
            }
            Item::Replay(plan) => {
                // Every node runs even after one fails, as the GPU would; the first fault wins.
                let mut first = None;
                for node in &plan.nodes {
                    if let Err(failure) = node.run() {
                        let fault = HostFault::from_failure(&self.name, &node.node.label, failure);
                        first.get_or_insert(fault);
                    }
                }
                first
            }
        }
    }
}

impl Drop for HostStream {
    fn drop(&mut self) {
        let capture = {
            let mut state = lock(&self.shared.state);
            state.closing = true;
            state.capture.take()
        };
        self.shared.work_ready.notify_all();
        if let Some(session) = capture {
            session.invalidate(HostFault::DroppedDuringCapture {
                stream: self.shared.name.clone(),
            });
        }
        // Joining from a worker could wait on a stream that waits on this very worker.
        if let Some(worker) = self.worker.take()
            && !on_worker_thread()
            && worker.join().is_err()
        {
            tracing::error!(stream = %self.shared.name, "host stream worker panicked");
        }
        if let Some(fault) = lock(&self.shared.state).fault.take() {
            tracing::warn!(stream = %self.shared.name, %fault, "host stream dropped with an unreported fault");
        }
    }
}
