//! Streams: in-order queues, each served by its own worker thread.
//!
//! Enqueuing takes the stream's lock once, pushes onto a `VecDeque` and signals a condvar; the
//! worker pops one item at a time and runs it outside the lock. The queue holds at most
//! [`QUEUE_CAPACITY`] items: like CUDA's launch queue, a full one blocks the enqueuing thread
//! until the worker has made room, so a long loop of launches or replays without a
//! synchronize costs bounded memory and shows its real cost. Blocking there cannot deadlock:
//! every queued item waits only on work enqueued before it (an event wait names the record
//! already made), and workers never wait on enqueuing threads. Every ordering decision (capture, race-detector clocks) is made under the
//! stream's lock at enqueue time, so it follows enqueue order exactly.
//!
//! Lock order, to stay deadlock-free: stream state, then an executable graph's last launch
//! (`LaunchEnd`), then event state, then capture session, then the context's detector; a
//! launch's hooks (`LaunchHook`) take their own queue's lock and a communicator's issue order
//! under the stream state, and nothing else under those.
//! No lock is held while user work runs or while blocking.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};

use super::capture::CaptureSession;
use super::clock::{Timeline, VectorClock};
use super::event::{Event, LatestRecord, RecordPoint};
use super::graph::{ExecPlan, Graph, GraphExec};
use super::memory::Pending;
use super::op::{Keep, Op, run_guarded};
use super::race::Detector;
use super::shared::{ContextShared, become_worker, in_launch, lock, on_worker_thread, wait};
use super::signal::{Signal, has_signals, signals_of};
use crate::vocab::fault::{CpuFault, OpSite, RaceReport};

/// Returns clocks taken for waits that were captured instead (in reverse, so each goes back
/// to the front of its queue in order).
fn give_back(joins: Vec<(Arc<Signal>, VectorClock)>) {
    for (signal, clock) in joins.into_iter().rev() {
        signal.unshift_clock(clock);
    }
}

/// Gives each post among `signals` the clock of `timeline` now, after its accesses.
fn post_clocks(detector: &mut Detector, timeline: Timeline, signals: &[(Arc<Signal>, bool)]) {
    for (signal, _) in signals.iter().filter(|(_, post)| *post) {
        signal.push_clock(detector.record(timeline));
    }
}

/// The most items a stream's queue holds before enqueuing blocks (CUDA's launch queue holds
/// about a thousand launches too).
pub(crate) const QUEUE_CAPACITY: usize = 1024;

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

/// One queued item, with the pending tokens of the memory it touches (dropped once it ran).
enum Item {
    Op(Op, Vec<Pending>),
    Record(Arc<RecordPoint>),
    Wait(Arc<RecordPoint>),
    /// A graph launch: the plan, its pending tokens, and the launch's number (see
    /// `LaunchHook`).
    Replay(Arc<ExecPlan>, Vec<Pending>, u64),
}

/// Where an executable graph's last launch ends: the stream (timeline) it went to, a point
/// its worker reaches after the replay, and the race detector's clock there. A launch on
/// another stream waits for it (see `Stream::launch`).
#[derive(Debug)]
pub(crate) struct LaunchEnd {
    timeline: Timeline,
    point: Arc<RecordPoint>,
    clock: Option<VectorClock>,
}

/// Mutable stream state, under the stream's lock.
#[derive(Default)]
struct StreamState {
    queue: VecDeque<Item>,
    submitted: u64,
    completed: u64,
    /// The first fault since the last synchronize.
    fault: Option<CpuFault>,
    capture: Option<Arc<CaptureSession>>,
    closing: bool,
    /// Set when the stream was dropped without waiting: the worker then reports, when it
    /// ends, a fault no synchronize took.
    detached: bool,
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

    fn note(&mut self, fault: CpuFault) {
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
pub(crate) struct Stream {
    pub(super) shared: Arc<StreamShared>,
    worker: Option<JoinHandle<()>>,
}

impl Stream {
    pub(super) fn spawn(
        ctx: Arc<ContextShared>,
        timeline: Timeline,
        options: StreamOptions,
        priority: i32,
    ) -> Result<Self, CpuFault> {
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
            .map_err(|error| CpuFault::WorkerSpawn {
                stream: shared.name.clone(),
                message: error.to_string(),
            })?;
        Ok(Stream {
            shared,
            worker: Some(worker),
        })
    }

    /// A process-unique id.
    pub(crate) fn id(&self) -> u64 {
        self.shared.id
    }

    /// What the stream's context shares with allocations.
    pub(crate) fn context_shared(&self) -> &Arc<ContextShared> {
        &self.shared.ctx
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
    /// misuse only; the op's own failure surfaces at the next [`Stream::synchronize`].
    pub(crate) fn enqueue(&self, op: Op) -> Result<(), CpuFault> {
        self.shared.enqueue(op).map(drop)
    }

    /// [`Stream::enqueue`], saying whether the op was captured (`true`) or queued to run
    /// (`false`), decided atomically with the enqueue: what code that fences eager work needs.
    pub(crate) fn enqueue_tracked(&self, op: Op) -> Result<bool, CpuFault> {
        self.shared.enqueue(op)
    }

    /// Records `event` here: it completes when the work queued so far has run.
    pub(crate) fn record(&self, event: &Event) -> Result<(), CpuFault> {
        self.shared.record(event)
    }

    /// Work queued here later waits until `event`'s recorded point completed. A never-recorded
    /// event is a no-op; an event recorded on a capturing stream makes this stream join it.
    pub(crate) fn wait(&self, event: &Event) -> Result<(), CpuFault> {
        self.shared.wait(event)
    }

    /// Work queued here later waits for the work queued on `other` so far.
    pub(crate) fn wait_stream(&self, other: &Stream) -> Result<(), CpuFault> {
        let event = Event::new(
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
    pub(crate) fn synchronize(&self) -> Result<(), CpuFault> {
        self.shared.synchronize()
    }

    /// The first fault since the last synchronize when it is a failed communication, left
    /// for that synchronize to report too: a host read that waited for the stream's work
    /// returns it rather than the values the failed operation never produced.
    pub(crate) fn pending_communication_failure(&self) -> Option<CpuFault> {
        let state = lock(&self.shared.state);
        match &state.fault {
            Some(fault @ CpuFault::Communication { .. }) => Some(fault.clone()),
            _ => None,
        }
    }

    /// Whether everything queued so far has run. A `true` answer orders later host accesses
    /// after that work, for the race detector. On a capturing stream it answers for the eager
    /// work queued before the capture (captured work never runs on the stream).
    pub(crate) fn query(&self) -> bool {
        self.shared.query()
    }

    /// Starts capturing: later work on this stream (and streams that join through events) is
    /// recorded into a graph instead of running.
    pub(crate) fn begin_capture(&self) -> Result<(), CpuFault> {
        let mut state = lock(&self.shared.state);
        if state.active_capture().is_some() {
            return Err(CpuFault::AlreadyCapturing {
                stream: self.shared.name.clone(),
            });
        }
        state.capture = Some(CaptureSession::begin(
            self.shared.timeline,
            &self.shared.name,
        ));
        Ok(())
    }

    /// Ends the capture begun on this stream and returns its graph. Every stream that joined
    /// leaves the capture, whether or not the graph is valid.
    pub(crate) fn end_capture(&self) -> Result<Graph, CpuFault> {
        let stream = self.shared.name.clone();
        let session = {
            let mut state = lock(&self.shared.state);
            let session = state
                .active_capture()
                .ok_or_else(|| CpuFault::NotCapturing {
                    stream: stream.clone(),
                })?;
            if session.origin != self.shared.timeline {
                return Err(CpuFault::NotCaptureOrigin {
                    stream,
                    origin: session.origin_name.clone(),
                });
            }
            state.capture = None;
            session
        };
        // Streams that joined leave it lazily: `active_capture` drops an ended session.
        session.end()
    }

    /// Enqueues one replay of every node of `exec`: after the work already enqueued here,
    /// before the work enqueued later. On a capturing stream the nodes are captured instead
    /// (`Ok(true)`), decided atomically with the enqueue.
    ///
    /// As CUDA's `cuGraphLaunch`, a launch runs after every earlier launch of `exec`: one made
    /// on another stream is waited for first (a launch on the same stream is behind it
    /// already), so two launches of one graph never run at once.
    pub(crate) fn launch(&self, exec: &GraphExec) -> Result<bool, CpuFault> {
        self.shared.launch(exec.plan(), &exec.last_launch)
    }

    /// Whether this stream is capturing (as origin or joined).
    pub(crate) fn is_capturing(&self) -> bool {
        lock(&self.shared.state).active_capture().is_some()
    }
}

impl StreamShared {
    /// The stream's lock, once its queue has room for one more item (or it captures, where
    /// nothing is queued). Taken before any ordering decision, so those still follow enqueue
    /// order. A worker thread (a host function, a CPU kernel) may not enqueue at all.
    fn admit(&self) -> Result<MutexGuard<'_, StreamState>, CpuFault> {
        // CUDA refuses driver calls from a host function (and device code makes none): work
        // enqueued there would pass here and fail on a GPU.
        self.refuse_on_worker()?;
        let mut state = lock(&self.state);
        while state.queue.len() >= QUEUE_CAPACITY && state.active_capture().is_none() {
            state.progress_waiters += 1;
            state = wait(&self.progress, state);
            state.progress_waiters -= 1;
        }
        Ok(state)
    }

    /// Refuses work enqueued from a worker thread (see [`admit`](Self::admit)), before
    /// anything is taken for it.
    fn refuse_on_worker(&self) -> Result<(), CpuFault> {
        match on_worker_thread() {
            true => Err(CpuFault::EnqueueInsideOp {
                stream: self.name.clone(),
            }),
            false => Ok(()),
        }
    }

    /// Queues or captures `op`; `Ok(true)` when captured.
    fn enqueue(&self, mut op: Op) -> Result<bool, CpuFault> {
        self.refuse_on_worker()?;
        // Dropped after the lock is released unless captured.
        let keep = std::mem::take(&mut op.keep);
        let signals = self.signals(&keep);
        let joins = self.signal_joins(&signals)?;
        let mut state = self.admit()?;
        if let Some(session) = state.active_capture() {
            give_back(joins);
            op.keep = keep;
            return session.add_op(self.timeline, op).map(|()| true);
        }
        let pending = Op::memories(&keep).map(|m| m.begin_work()).collect();
        if self.ctx.checked {
            let label: Arc<str> = Arc::from(op.label());
            let accesses = op.effective_accesses();
            let mut detector = self.ctx.detector();
            for (_, clock) in &joins {
                detector.wait(self.timeline, clock);
            }
            let races =
                detector.stream_op(self.timeline, &self.name, [(&label, accesses.as_slice())]);
            post_clocks(&mut detector, self.timeline, &signals);
            drop(detector);
            for race in races {
                state.note(CpuFault::Race(Box::new(race)));
            }
        }
        let wake = state.push(Item::Op(op, pending));
        self.wake(wake);
        drop(state);
        drop(keep);
        Ok(false)
    }

    /// Queues (or captures) one replay of `plan`; `Ok(true)` when captured.
    pub(super) fn launch(
        &self,
        plan: &Arc<ExecPlan>,
        last_launch: &Mutex<Option<LaunchEnd>>,
    ) -> Result<bool, CpuFault> {
        self.refuse_on_worker()?;
        // A checked replay that posts or waits on signals (a one-sided exchange between
        // simulated ranks) orders them node by node, before the stream's lock is taken: a
        // wait's clock may have to wait for another rank's thread to enqueue its post, and
        // that rank's work may need this stream's worker to progress meanwhile.
        let signalled = self.ctx.checked
            && plan.nodes.iter().any(|n| has_signals(&n.node.keep))
            && lock(&self.state).active_capture().is_none();
        let signalled_races = if signalled {
            Some(self.replay_signal_clocks(plan)?)
        } else {
            None
        };
        let mut state = self.admit()?;
        if let Some(session) = state.active_capture() {
            let nodes: Vec<_> = plan.nodes.iter().map(|n| n.node.clone()).collect();
            return session.add_graph(self.timeline, &nodes).map(|()| true);
        }
        // The graph's earlier launch, when it went to another stream: waited for here, and
        // this launch's end published for the next, both under this stream's lock (taken
        // when the queue had room), so the graph's own lock is never held while blocking.
        let mut last = lock(last_launch);
        if let Some(end) = last.as_ref().filter(|end| end.timeline != self.timeline) {
            if let Some(clock) = &end.clock {
                self.ctx.detector().wait(self.timeline, clock);
            }
            if end.point.reached_at().is_none() {
                // Whether the worker must be woken is the same for every push under one lock:
                // the last push's answer is used below.
                let _ = state.push(Item::Wait(end.point.clone()));
            }
        }
        // Under the stream's lock, so in the order launches are enqueued: what the launch
        // waits for (event wait nodes pick their records here, before any record node of
        // this launch records), then, below, what it publishes.
        let hooks = &plan.on_launch;
        static NEXT_LAUNCH: AtomicU64 = AtomicU64::new(1);
        let launch = NEXT_LAUNCH.fetch_add(1, Ordering::Relaxed);
        let mut joins = Vec::new();
        for hook in hooks {
            hook.before(&mut joins, launch);
        }
        let mut clock = None;
        if self.ctx.checked {
            let mut detector = self.ctx.detector();
            for join in &joins {
                detector.wait(self.timeline, join);
            }
            let mut races = match signalled_races {
                Some(races) => races,
                None => {
                    let nodes = plan.nodes.iter();
                    detector.stream_op(
                        self.timeline,
                        &self.name,
                        nodes.map(|n| (&n.node.label, n.accesses.as_slice())),
                    )
                }
            };
            if !plan.intra_reported.swap(true, Ordering::Relaxed) {
                for race in plan.intra_races() {
                    let site = |(op, stream): &(Arc<str>, Arc<str>)| OpSite {
                        op: op.clone(),
                        stream: stream.clone(),
                    };
                    let (earlier, later) = (site(&race.earlier), site(&race.later));
                    races.push(detector.report(race.buffer, race.hazard, earlier, later));
                }
            }
            if !hooks.is_empty() {
                clock = Some(detector.record(self.timeline));
            }
            drop(detector);
            for race in races {
                state.note(CpuFault::Race(Box::new(race)));
            }
        }
        for hook in hooks {
            hook.after(clock.as_ref(), launch);
        }
        let pending = plan.memories.iter().map(|m| m.begin_work()).collect();
        let _ = state.push(Item::Replay(plan.clone(), pending, launch));
        let end = LaunchEnd {
            timeline: self.timeline,
            point: Arc::new(RecordPoint::default()),
            clock: self
                .ctx
                .checked
                .then(|| self.ctx.detector().record(self.timeline)),
        };
        let wake = state.push(Item::Record(end.point.clone()));
        *last = Some(end);
        drop(last);
        self.wake(wake);
        Ok(false)
    }

    /// The race detector's view of one replay of a plan with signal nodes, in node order:
    /// a wait joins its post's clock (blocking, without any lock, until the post was
    /// enqueued), a node's accesses are checked at the clock reached there, and a post takes
    /// that clock. Returns the races found.
    fn replay_signal_clocks(&self, plan: &ExecPlan) -> Result<Vec<RaceReport>, CpuFault> {
        let mut races = Vec::new();
        for n in &plan.nodes {
            let signals = signals_of(&n.node.keep);
            for (signal, _) in signals.iter().filter(|(_, post)| !post) {
                let clock = signal.take_clock()?;
                self.ctx.detector().wait(self.timeline, &clock);
            }
            let mut detector = self.ctx.detector();
            races.extend(detector.stream_op(
                self.timeline,
                &self.name,
                [(&n.node.label, n.accesses.as_slice())],
            ));
            post_clocks(&mut detector, self.timeline, &signals);
        }
        Ok(races)
    }

    /// The signals `keep` posts or waits on, when the race detector must order them.
    fn signals(&self, keep: &[Keep]) -> Vec<(Arc<Signal>, bool)> {
        if self.ctx.checked {
            signals_of(keep)
        } else {
            Vec::new()
        }
    }

    /// The clocks of the posts the waits among `signals` match, taken before the stream's
    /// lock (taking one may block until another rank's thread enqueues the post); none
    /// while the stream captures (a capture orders nothing yet).
    fn signal_joins(
        &self,
        signals: &[(Arc<Signal>, bool)],
    ) -> Result<Vec<(Arc<Signal>, VectorClock)>, CpuFault> {
        if signals.iter().all(|(_, post)| *post) || lock(&self.state).active_capture().is_some() {
            return Ok(Vec::new());
        }
        let mut joins = Vec::new();
        for (signal, _) in signals.iter().filter(|(_, post)| !post) {
            match signal.take_clock() {
                Ok(clock) => joins.push((signal.clone(), clock)),
                Err(fault) => {
                    give_back(joins);
                    return Err(fault);
                }
            }
        }
        Ok(joins)
    }

    fn record(self: &Arc<Self>, event: &Event) -> Result<(), CpuFault> {
        self.check_same_context(event)?;
        let mut state = self.admit()?;
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

    fn wait(self: &Arc<Self>, event: &Event) -> Result<(), CpuFault> {
        self.check_same_context(event)?;
        let mut state = self.admit()?;
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
                session.join(self.timeline, &self.name, &frontier);
                Ok(())
            }
            (LatestRecord::Captured { session, frontier }, None) => {
                if session.is_ended() {
                    return Err(CpuFault::EventInCapture {
                        event: event.shared.name.clone(),
                        operation: "wait",
                    });
                }
                session.join(self.timeline, &self.name, &frontier);
                state.capture = Some(session);
                Ok(())
            }
        }
    }

    fn isolation(
        &self,
        session: &CaptureSession,
        event: &Event,
        where_recorded: &'static str,
    ) -> CpuFault {
        let fault = CpuFault::CaptureIsolation {
            stream: self.name.clone(),
            event: event.shared.name.clone(),
            where_recorded,
        };
        session.invalidate(fault.clone());
        fault
    }

    fn check_same_context(&self, event: &Event) -> Result<(), CpuFault> {
        if Arc::ptr_eq(&self.ctx, &event.shared.ctx) {
            Ok(())
        } else {
            Err(CpuFault::ForeignEvent {
                stream: self.name.clone(),
                event: event.shared.name.clone(),
            })
        }
    }

    pub(super) fn synchronize(&self) -> Result<(), CpuFault> {
        if on_worker_thread() {
            return Err(CpuFault::BlockingCallInsideOp {
                operation: "stream synchronize",
            });
        }
        let mut state = lock(&self.state);
        if let Some(session) = state.active_capture() {
            let fault = CpuFault::NotAllowedInCapture {
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
        become_worker();
        loop {
            let item = {
                let mut state = lock(&self.state);
                loop {
                    if let Some(item) = state.queue.pop_front() {
                        break item;
                    }
                    if state.closing {
                        if state.detached
                            && let Some(fault) = state.fault.take()
                        {
                            tracing::warn!(stream = %self.name, %fault, "CPU-backend stream dropped with an unreported fault");
                        }
                        return;
                    }
                    state.worker_idle = true;
                    state = wait(&self.work_ready, state);
                    state.worker_idle = false;
                }
            };
            // The work itself runs guarded; what is left to catch here is a panic while the
            // item is dropped (the last handle of a graph's closures, say, whose drop is user
            // code). The worker must survive it: a dead worker never completes its queue, so
            // every synchronize of the stream would wait for ever.
            let mut fault = None;
            if let Err(failure) = run_guarded(|| {
                fault = self.execute(item);
                Ok(())
            }) {
                fault = Some(CpuFault::from_failure(
                    &self.name,
                    self.id,
                    ("dropping a finished operation", None),
                    false,
                    failure,
                ));
            }
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

    fn execute(&self, item: Item) -> Option<CpuFault> {
        match item {
            Item::Op(op, pending) => {
                let fault = op.run().err().map(|(failed, failure)| {
                    CpuFault::from_failure(
                        &self.name,
                        self.id,
                        (&failed.label, failed.stage),
                        failed.host_function,
                        failure,
                    )
                });
                drop(pending);
                fault
            }
            Item::Record(point) => {
                point.complete();
                None
            }
            Item::Wait(point) => {
                point.wait();
                None
            }
            Item::Replay(plan, pending, launch) => {
                // Every node runs even after one fails, as the GPU would; the first fault wins.
                let mut first = None;
                in_launch(launch, || {
                    for node in &plan.nodes {
                        if let Err(failure) = node.run() {
                            let fault = CpuFault::from_failure(
                                &self.name,
                                self.id,
                                (&node.node.label, node.node.stage),
                                node.node.host_function,
                                failure,
                            );
                            first.get_or_insert(fault);
                        }
                    }
                });
                // What nodes that did not run (after a failure inside a child graph) left.
                for hook in &plan.on_launch {
                    hook.end(launch);
                }
                drop(pending);
                first
            }
        }
    }
}

impl Stream {
    /// Closes the queue; with `wait`, finishes the queued work and joins the worker (unless
    /// called from inside an operation, where waiting could deadlock), returning the fault no
    /// synchronize reported yet. Without, the worker finishes the queued work on its own and
    /// ends, as `cuStreamDestroy` returns at once and the device completes the stream's work
    /// (queued work may wait on what the host does next, a flag it writes, say: joining would
    /// wait for that for ever); the fault known so far is returned, a later one logged by the
    /// worker.
    fn shut_down(&mut self, wait: bool) -> Option<CpuFault> {
        let capture = {
            let mut state = lock(&self.shared.state);
            state.closing = true;
            state.detached = !wait;
            state.capture.take()
        };
        self.shared.work_ready.notify_all();
        if let Some(session) = capture {
            session.invalidate(CpuFault::DroppedDuringCapture {
                stream: self.shared.name.clone(),
            });
        }
        // Joining from a worker could wait on a stream that waits on this very worker.
        if let Some(worker) = self.worker.take()
            && wait
            && !on_worker_thread()
            && worker.join().is_err()
        {
            tracing::error!(stream = %self.shared.name, "host stream worker panicked");
        }
        lock(&self.shared.state).fault.take()
    }

    /// Destroys the stream now: its queued work runs to the end first, and the fault no
    /// synchronize reported yet is returned.
    pub(crate) fn close(mut self) -> Result<(), CpuFault> {
        self.shut_down(true).map_or(Ok(()), Err)
    }
}

impl Drop for Stream {
    /// Returns at once (after `close`, nothing is left to wait for); the queued work still
    /// runs, and the context's synchronize waits for it.
    fn drop(&mut self) {
        if let Some(fault) = self.shut_down(false) {
            tracing::warn!(stream = %self.shared.name, %fault, "CPU-backend stream dropped with an unreported fault");
        }
    }
}
