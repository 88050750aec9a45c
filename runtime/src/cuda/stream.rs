//! CUDA streams, and the capture bookkeeping every stream handle shares.
//!
//! Which capture a handle takes part in is tracked here, per handle rather than per
//! `Stream` value, so two `Stream`s over one handle (one borrowed from the other with
//! `Stream::from_handle`) see the same state. Every enqueue that must know whether it is
//! being captured holds the handle's gate shared while it checks and enqueues; beginning and
//! ending a capture, and joining one, hold it exclusively. So an enqueue is either wholly
//! inside a capture or wholly outside it, whatever other threads do.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{
    Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak,
};

use crate::driver::check;
use crate::error::{Error, Result};
use crate::panic_log::PanicLog;
use crate::sys::{self, CUresult, CUstreamCaptureStatus};

use super::{Context, Device, Event, FenceClock};

/// `CU_STREAM_PER_THREAD`: the calling thread's default stream, a different stream on every
/// thread under one handle value.
const CU_STREAM_PER_THREAD: usize = 0x2;

/// What every `Stream` over one handle shares.
#[derive(Debug)]
pub(crate) struct HandleState {
    /// The capture the handle takes part in (0: none), as our own calls tracked it.
    capture: AtomicU64,
    /// Shared by enqueues while they check the capture and enqueue; exclusive for beginning,
    /// ending and joining captures.
    gate: RwLock<()>,
    /// Panics caught in host functions enqueued on the handle.
    panics: PanicLog,
    /// Panic logs of graphs launched on the handle since the last synchronize: a host node's
    /// panic is reported by the stream that replayed it.
    watched: Mutex<Vec<PanicLog>>,
    /// Whether `watched` may be non-empty (set under its lock with each log, cleared under it
    /// when they are taken): a synchronize after launches of graphs without host nodes
    /// takes no lock for it.
    watching: AtomicBool,
    /// How many `Stream` values over the handle are alive and not yet destroying it. A value
    /// lowers it (under this lock) before it destroys an owned handle or lets go of a borrowed
    /// one, so while it is above zero and the lock is held, the handle is live: what lets
    /// work be enqueued on it by code that holds no `Stream` (see [`StreamLink`]).
    live: Mutex<usize>,
    /// Objects of other libraries that hold the raw handle (a cudarc stream over it): while
    /// one lives, the handle is not destroyed (it is leaked instead), and captures are asked
    /// of the driver, since that library may begin one. `ever_lent` keeps the check off the
    /// hot path of handles never lent.
    lent: Mutex<Vec<Weak<dyn Any + Send + Sync>>>,
    ever_lent: AtomicBool,
    /// The fence sequence of the handle's pinned-memory work (see `fence.rs`).
    clock: Arc<FenceClock>,
}

/// Handle states by (context, handle): the legacy and per-thread default streams have the
/// same handle in every context.
type HandleKey = (usize, usize);

static HANDLES: Mutex<Option<HashMap<HandleKey, Weak<HandleState>>>> = Mutex::new(None);

/// The states of handles that joined a capture by waiting on one of its events, by capture
/// id, so that ending the capture takes them out of it again.
static JOINED: Mutex<Option<HashMap<u64, Vec<Weak<HandleState>>>>> = Mutex::new(None);

/// Locks `mutex`, taking it back when a panic poisoned it (as every lock of this module does).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HandleState {
    /// The one state of `(ctx, raw)` in the process.
    fn of(ctx: &Arc<Context>, raw: sys::CUstream) -> Arc<HandleState> {
        let key = (ctx.raw() as usize, raw as usize);
        let mut handles = lock(&HANDLES);
        let handles = handles.get_or_insert_with(HashMap::new);
        if let Some(state) = handles.get(&key).and_then(Weak::upgrade) {
            return state;
        }
        handles.retain(|_, state| state.strong_count() > 0);
        let state = Arc::new(HandleState {
            capture: AtomicU64::new(0),
            gate: RwLock::new(()),
            panics: PanicLog::default(),
            watched: Mutex::new(Vec::new()),
            watching: AtomicBool::new(false),
            live: Mutex::new(0),
            lent: Mutex::new(Vec::new()),
            ever_lent: AtomicBool::new(false),
            clock: Arc::new(FenceClock::new(ctx, raw)),
        });
        handles.insert(key, Arc::downgrade(&state));
        state
    }

    /// Whether an object another library holds still has the handle.
    fn is_lent(&self) -> bool {
        if !self.ever_lent.load(Ordering::Acquire) {
            return false;
        }
        let mut lent = lock(&self.lent);
        lent.retain(|holder| holder.strong_count() > 0);
        !lent.is_empty()
    }

    fn tracked(&self) -> Option<u64> {
        match self.capture.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Held exclusively while the handle begins, ends or joins a capture, or leaves one.
    pub(super) fn gate_exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the handle out of capture `id` if it still tracks it (call under its exclusive
    /// gate).
    pub(super) fn leave(&self, id: u64) {
        let _ = self
            .capture
            .compare_exchange(id, 0, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A weak link to a stream handle, for enqueueing on it later without keeping it alive: a
/// stream-ordered allocation remembers the stream it was allocated on, to be freed there.
#[derive(Debug, Clone)]
pub(crate) struct StreamLink {
    state: Weak<HandleState>,
    raw: sys::CUstream,
    id: u64,
}

// SAFETY: the raw handle is only passed to the driver, and only while `with_live` has
// established that it is live; the state is atomics and locks.
unsafe impl Send for StreamLink {}
// SAFETY: as above.
unsafe impl Sync for StreamLink {}

impl StreamLink {
    /// The driver's id of the linked stream.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Calls `f` with the raw handle while it is certainly live and outside any capture this
    /// crate tracks: some `Stream` value over it is alive and cannot finish destroying it
    /// until `f` returns, and no capture can begin on it through this crate meanwhile (the
    /// handle's gate is held shared). `None`, without calling `f`, when that cannot be
    /// established at once (the stream is gone, capturing, or its gate is contended: the gate
    /// is only tried, never waited for, so a caller that holds it already cannot deadlock).
    pub(crate) fn with_live<R>(&self, f: impl FnOnce(sys::CUstream) -> R) -> Option<R> {
        let state = self.state.upgrade()?;
        let _gate = state.gate.try_read().ok()?;
        if state.tracked().is_some() {
            return None;
        }
        let live = lock(&state.live);
        (*live > 0).then(|| f(self.raw))
    }
}

/// A CUDA stream.
///
/// Invariant: `raw` is a live stream of `ctx`. An owned stream was created here and is
/// destroyed once, in `Drop` or `destroy`; a borrowed one (`Stream::borrow`) is kept live by
/// its owner for as long as this value and the work enqueued through it, and is not captured
/// by code other than this crate. `state` is the one [`HandleState`] of `(ctx, raw)`.
pub(crate) struct Stream {
    ctx: Arc<Context>,
    raw: sys::CUstream,
    owned: bool,
    /// The driver's process-unique id (`cuStreamGetId`), read once at creation.
    id: u64,
    state: Arc<HandleState>,
    /// Whether this value is counted in `state.live` (until it retires).
    counted: bool,
}

// SAFETY: a CUstream may be used from any thread once its context is current, which every
// method ensures; the shared state is atomics and locks.
unsafe impl Send for Stream {}
// SAFETY: every method takes `&self`; the driver calls it makes are thread-safe per stream
// (CUDA allows enqueueing on one stream from several threads), and the capture check and
// enqueue are made atomic with respect to capture by the handle's gate.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream with raw `CU_STREAM_*` flags, and a priority when `Some` (the driver
    /// clamps it into the context's range).
    pub(crate) fn create(ctx: &Arc<Context>, flags: u32, priority: Option<i32>) -> Result<Stream> {
        let d = ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        let code = match priority {
            // SAFETY: a valid out-pointer; the context is current.
            Some(p) => unsafe { (d.cuStreamCreateWithPriority)(&mut raw, flags, p) },
            // SAFETY: as above.
            None => unsafe { (d.cuStreamCreate)(&mut raw, flags) },
        };
        check(
            if priority.is_some() {
                "cuStreamCreateWithPriority"
            } else {
                "cuStreamCreate"
            },
            code,
        )?;
        Stream::wrap(ctx, raw, true)
    }

    /// Borrows a stream created by other code.
    ///
    /// # Safety
    /// `raw` must be a stream of `ctx` (or the legacy/per-thread default stream) that stays
    /// valid for as long as the returned value and anything enqueued through it, and that no
    /// code other than this crate captures while the returned value is alive.
    pub(crate) unsafe fn borrow(ctx: &Arc<Context>, raw: sys::CUstream) -> Result<Stream> {
        if raw as usize == CU_STREAM_PER_THREAD {
            return Err(Error::invalid(
                "Stream::from_handle",
                "`CU_STREAM_PER_THREAD` names another stream on every thread, and a `Stream` \
                 may move between threads: its id, capture state and pinned fences would \
                 belong to one thread's stream while its work goes to another's (create a \
                 stream, or borrow a real handle)",
            ));
        }
        Stream::wrap(ctx, raw, false)
    }

    fn wrap(ctx: &Arc<Context>, raw: sys::CUstream, owned: bool) -> Result<Stream> {
        let state = HandleState::of(ctx, raw);
        *lock(&state.live) += 1;
        if owned && !state.is_lent() {
            // This value keeps the handle live until it destroys it, which covers the
            // handle's fences first: its pinned-memory fences may stay lazy (`fence.rs`).
            state.clock.set_lazy(true);
        }
        let mut stream = Stream {
            ctx: ctx.clone(),
            raw,
            owned,
            id: 0,
            state,
            counted: true,
        };
        // On failure `stream` drops and destroys an owned handle, so nothing leaks.
        let d = ctx.bind()?;
        let mut id = 0;
        // SAFETY: a valid out-pointer; `raw` is live (the type's invariant).
        check("cuStreamGetId", unsafe { (d.cuStreamGetId)(raw, &mut id) })?;
        stream.id = id;
        Ok(stream)
    }

    /// The context.
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The raw handle: live for as long as `self` (the type's invariant).
    pub(crate) fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// The driver's process-unique id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The handle's pinned-memory fence sequence (see `fence.rs`).
    pub(crate) fn fence_clock(&self) -> &Arc<FenceClock> {
        &self.state.clock
    }

    /// Covers the handle's pinned-memory fences with a record, before the handle begins or
    /// joins a capture (call under the exclusive gate): while it captures, no eager record can
    /// be made on it (`fence.rs`).
    pub(crate) fn cover_fences(&self) {
        self.state.clock.cover_all();
    }

    /// A weak link to the handle (see [`StreamLink`]).
    pub(crate) fn link(&self) -> StreamLink {
        StreamLink {
            state: Arc::downgrade(&self.state),
            raw: self.raw,
            id: self.id,
        }
    }

    /// Records that `holder`, an object of another library, holds the raw handle: the handle
    /// is not destroyed while it lives, and captures on it are asked of the driver.
    #[cfg(feature = "cudarc")]
    pub(crate) fn lend(&self, holder: Weak<dyn Any + Send + Sync>) {
        // The other library may capture the handle without telling us: from now on its
        // pinned-memory fences are recorded at once (`fence.rs`).
        self.state.clock.set_lazy(false);
        lock(&self.state.lent).push(holder);
        self.state.ever_lent.store(true, Ordering::Release);
    }

    /// Stops counting this value as keeping the handle live (once): after this, links no
    /// longer enqueue on it through this value.
    fn retire(&mut self) {
        if std::mem::replace(&mut self.counted, false) {
            *lock(&self.state.live) -= 1;
        }
    }

    /// Whether this value owns (and destroys) the handle.
    pub(crate) fn is_owned(&self) -> bool {
        self.owned
    }

    /// Binds the context and returns the driver, for the driver calls of this module family.
    #[inline]
    pub(crate) fn bind(&self) -> Result<&'static crate::driver::Driver> {
        self.ctx.bind()
    }

    /// Raw `CU_STREAM_*` creation flags.
    pub(crate) fn flags(&self) -> Result<u32> {
        let d = self.bind()?;
        let mut flags = 0;
        // SAFETY: a valid out-pointer and a live stream (the type's invariant).
        check("cuStreamGetFlags", unsafe {
            (d.cuStreamGetFlags)(self.raw, &mut flags)
        })?;
        Ok(flags)
    }

    /// The priority, after the driver's clamping.
    pub(crate) fn priority(&self) -> Result<i32> {
        let d = self.bind()?;
        let mut priority = 0;
        // SAFETY: a valid out-pointer and a live stream.
        check("cuStreamGetPriority", unsafe {
            (d.cuStreamGetPriority)(self.raw, &mut priority)
        })?;
        Ok(priority)
    }

    /// The device, checked with `cuStreamGetDevice` (CUDA 12.8) where the driver has it.
    pub(crate) fn device(&self) -> Result<Device> {
        let d = self.bind()?;
        if let Some(get_device) = d.cuStreamGetDevice {
            let mut dev = 0;
            // SAFETY: a valid out-pointer and a live stream.
            check("cuStreamGetDevice", unsafe {
                get_device(self.raw, &mut dev)
            })?;
            if dev != self.ctx.device().handle() {
                return Err(Error::invalid(
                    "Stream::device",
                    "the driver reports a device other than the stream's context's",
                ));
            }
        }
        Ok(self.ctx.device())
    }

    /// Whether all work enqueued so far has completed.
    pub(crate) fn query(&self) -> Result<bool> {
        let d = self.bind()?;
        // SAFETY: a live stream.
        match unsafe { (d.cuStreamQuery)(self.raw) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuStreamQuery", code).map(|()| false),
        }
    }

    /// Blocks until all enqueued work has completed. Reports, in this order: a driver error
    /// (including an asynchronous fault of earlier work), then a panic caught in a host
    /// function or a replayed host node that ran on this handle since the last synchronize.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.drain()?;
        self.take_panics()
    }

    /// Waits for the stream's work without reporting panics (the stream's last moments).
    /// Completes the pinned-memory fences marked before it began, so a host access after it
    /// makes no driver call.
    pub(crate) fn drain(&self) -> Result<()> {
        let d = self.bind()?;
        let marked = self.state.clock.snapshot();
        // SAFETY: a live stream.
        check("cuStreamSynchronize", unsafe {
            (d.cuStreamSynchronize)(self.raw)
        })?;
        self.state.clock.synchronized(marked);
        Ok(())
    }

    /// The panics recorded since the last report, as an error.
    pub(crate) fn take_panics(&self) -> Result<()> {
        let mut messages: Vec<String> = self.state.panics.take().into_iter().collect();
        // Logs watched by launches made before this call (on any thread that synchronized
        // with this one) set the flag before it.
        if self.state.watching.load(Ordering::Acquire) {
            let watched = {
                let mut watched = lock(&self.state.watched);
                self.state.watching.store(false, Ordering::Relaxed);
                std::mem::take(&mut *watched)
            };
            messages.extend(watched.iter().filter_map(PanicLog::take));
        }
        if messages.is_empty() {
            return Ok(());
        }
        Err(Error::HostPanic {
            stream: self.id,
            // The panic log knows no stage; fault tracking names one.
            stage: None,
            message: messages.join("; "),
        })
    }

    /// The log host functions enqueued on this handle record their panics in.
    pub(crate) fn panic_log(&self) -> &PanicLog {
        &self.state.panics
    }

    /// Reports `log`'s panics at this handle's next synchronize (a graph launched here).
    pub(crate) fn watch_panics(&self, log: &PanicLog) {
        let mut watched = lock(&self.state.watched);
        if !watched.iter().any(|w| w.same_as(log)) {
            watched.push(log.clone());
        }
        self.state.watching.store(true, Ordering::Release);
    }

    /// Makes later work wait for `event`'s most recent record. Waiting on an event recorded
    /// inside a capture joins this handle to the capture.
    pub(crate) fn wait_event(&self, event: &Event) -> Result<()> {
        let _gate = self.gate_exclusive();
        // The wait may join a capture (whether or not we know the event was recorded in one):
        // no eager record could be made on the handle then, so its fences are covered first,
        // as at any enqueue (an atomic load when nothing is uncovered; under the exclusive
        // gate no mark can race with it).
        self.state.clock.cover_before_enqueue();
        let d = self.bind()?;
        // SAFETY: a live stream and a live event (both types' invariants); the public layer
        // checked that they belong to one context.
        check("cuStreamWaitEvent", unsafe {
            (d.cuStreamWaitEvent)(self.raw, event.raw(), sys::CU_EVENT_WAIT_DEFAULT)
        })?;
        // The driver joins this handle to the capture the event was recorded in, if that
        // capture is still going on: ask it rather than trust an old record.
        if let Some(id) = event.recorded_in_capture()
            && self.state.tracked() != Some(id)
            && self.capture_info()? == (CUstreamCaptureStatus::ACTIVE, id)
        {
            self.state.capture.store(id, Ordering::Release);
            lock(&JOINED)
                .get_or_insert_with(HashMap::new)
                .entry(id)
                .or_default()
                .push(Arc::downgrade(&self.state));
        }
        Ok(())
    }

    /// Records `event` at the current end of this stream.
    pub(crate) fn record(&self, event: &Event) -> Result<()> {
        let _gate = self.gate();
        let capture = self.capture_now()?;
        self.record_under_gate(event)?;
        event.set_recorded_in_capture(capture);
        Ok(())
    }

    /// Records `event` without taking the gate: for callers that hold it already (the gate is
    /// never taken twice by one thread, since a waiting writer would deadlock it).
    pub(crate) fn record_under_gate(&self, event: &Event) -> Result<()> {
        let d = self.bind()?;
        // SAFETY: a live stream and a live event (both types' invariants) of one context (the
        // callers' objects all come from this stream's context).
        check("cuEventRecord", unsafe {
            (d.cuEventRecord)(event.raw(), self.raw)
        })
    }

    /// Copies the attributes of `src` (a stream of the same context).
    pub(crate) fn copy_attributes_from(&self, src: &Stream) -> Result<()> {
        let d = self.bind()?;
        // SAFETY: two live streams of one context (checked by the public layer).
        check("cuStreamCopyAttributes", unsafe {
            (d.cuStreamCopyAttributes)(self.raw, src.raw)
        })
    }

    /// Held shared while an enqueue checks whether it is captured and enqueues.
    /// Covers the handle's lazy pinned-memory fences first, if any may be uncovered (one
    /// atomic load otherwise), so that the host's wait for earlier work does not wait for
    /// this enqueue (`fence.rs`).
    pub(crate) fn gate(&self) -> RwLockReadGuard<'_, ()> {
        let gate = self
            .state
            .gate
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        self.state.clock.cover_before_enqueue();
        gate
    }

    /// Held exclusively while the handle begins, ends or joins a capture.
    pub(crate) fn gate_exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.state
            .gate
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The capture this handle takes part in, as tracked (call under the gate). No driver
    /// call: hot paths use it.
    #[inline]
    pub(crate) fn tracked_capture(&self) -> Option<u64> {
        self.state.tracked()
    }

    /// The capture an enqueue made now would be recorded into (call under the gate). For a
    /// borrowed handle the driver is asked as well: a capture begun by other code, which
    /// could not keep our memory alive, is an error rather than a silent hazard.
    #[inline]
    pub(crate) fn capture_now(&self) -> Result<Option<u64>> {
        let tracked = self.state.tracked();
        if self.owned && !self.state.is_lent() {
            return Ok(tracked);
        }
        match self.capture_info()? {
            (CUstreamCaptureStatus::NONE, _) => Ok(tracked.filter(|_| false)),
            (_, id) if Some(id) == tracked => Ok(tracked),
            _ => Err(Error::invalid(
                "Stream",
                "the borrowed stream is being captured by code outside gpu-pipeline, which \
                 cannot keep the memory of this work alive in its graph; end that capture, or \
                 capture through `Stream::begin_capture`",
            )),
        }
    }

    /// The driver's capture status and id for this handle.
    pub(crate) fn capture_info(&self) -> Result<(CUstreamCaptureStatus, u64)> {
        let d = self.bind()?;
        let mut status = CUstreamCaptureStatus::NONE;
        let mut id = 0;
        // SAFETY: a live stream; null for the outputs not wanted, which the API allows.
        check("cuStreamGetCaptureInfo", unsafe {
            (d.cuStreamGetCaptureInfo)(
                self.raw,
                &mut status,
                &mut id,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        })?;
        Ok((status, id))
    }

    /// Marks the handle as taking part in capture `id` (under the exclusive gate).
    pub(crate) fn set_tracked_capture(&self, id: Option<u64>) {
        self.state.capture.store(id.unwrap_or(0), Ordering::Release);
    }

    /// The states of the other handles that joined capture `id` (this one, its origin, left
    /// out), each once. The origin ends the capture holding their exclusive gates as well as
    /// its own (see `capture::end`), always in that order: origin first.
    pub(crate) fn joined_handles(&self, id: u64) -> Vec<Arc<HandleState>> {
        let joined = lock(&JOINED);
        let mut states: Vec<Arc<HandleState>> = Vec::new();
        let all = joined.as_ref().and_then(|m| m.get(&id));
        for state in all.into_iter().flatten().filter_map(Weak::upgrade) {
            if !Arc::ptr_eq(&state, &self.state) && !states.iter().any(|s| Arc::ptr_eq(s, &state)) {
                states.push(state);
            }
        }
        states
    }

    /// Whether this handle takes part in capture `id` by having joined it (rather than having
    /// begun it).
    pub(crate) fn joined(&self, id: u64) -> bool {
        let joined = lock(&JOINED);
        let all = joined.as_ref().and_then(|m| m.get(&id));
        all.into_iter()
            .flatten()
            .any(|state| std::ptr::eq(state.as_ptr(), Arc::as_ptr(&self.state)))
    }

    /// Forgets which handles joined capture `id` (it is over).
    pub(crate) fn forget_joined(id: u64) {
        if let Some(map) = lock(&JOINED).as_mut() {
            map.remove(&id);
        }
    }

    /// Destroys an owned stream now and returns the driver's verdict. Work already enqueued
    /// still completes (the driver defers the release).
    pub(crate) fn destroy(&mut self) -> Result<()> {
        if self.counted && self.state.tracked().is_none() {
            super::graph::stream_closing(self);
        }
        self.retire();
        if !std::mem::replace(&mut self.owned, false) {
            return Ok(());
        }
        // The handle goes away (or is leaked, unused by us): its pinned-memory fences are
        // covered while it is still live (`fence.rs`).
        self.state.clock.set_lazy(false);
        if self.state.is_lent() {
            // Another library still holds the handle (see `lend`): destroying it would leave
            // that holder with a dangling handle, so it is leaked instead.
            tracing::warn!(
                stream = self.id,
                "a stream lent to another library is dropped while that library still holds \
                 it; its handle is leaked, not destroyed"
            );
            return self.take_panics();
        }
        let d = self.bind()?;
        if let Some(id) = self.state.tracked()
            && !self.joined(id)
            && !self.abandon_capture(d, id)
        {
            return Err(Error::invalid(
                "Stream::close",
                "the stream was closed while capturing and the capture could not be ended; \
                 the stream is leaked",
            ));
        }
        // SAFETY: we own the stream (the type's invariant) and release it once: `owned` is
        // cleared above.
        check("cuStreamDestroy", unsafe { (d.cuStreamDestroy)(self.raw) })?;
        self.take_panics()
    }
}

impl Stream {
    /// Ends capture `id`, begun on this handle, which is going away without ending it: every
    /// stream that joined it leaves it now, under its gate, rather than go on tracking a
    /// capture the driver may drop with the handle (its enqueues would then run unkept and
    /// unfenced). The graph is destroyed unused; what the capture kept is leaked with its
    /// record, which nothing launches. `false` when the driver refused to end it: the
    /// capture goes on, so the handle must not be destroyed.
    fn abandon_capture(&self, d: &crate::driver::Driver, id: u64) -> bool {
        let _gate = self.gate_exclusive();
        let joined = self.joined_handles(id);
        let _joined_gates: Vec<_> = joined.iter().map(|state| state.gate_exclusive()).collect();
        let mut graph = std::ptr::null_mut();
        // SAFETY: a live stream (destroyed only after this) and a valid out-pointer.
        let code = unsafe { (d.cuStreamEndCapture)(self.raw, &mut graph) };
        if code.is_success() && !graph.is_null() {
            // SAFETY: the graph the driver just returned, which nothing else owns or launches.
            unsafe { (d.cuGraphDestroy)(graph) };
        }
        if !code.is_success()
            && let Ok((status, now)) = self.capture_info()
            && status != CUstreamCaptureStatus::NONE
            && now == id
        {
            // Still capturing (ending it was refused): the streams stay in it, and so does
            // this handle, which is leaked with the capture rather than destroyed.
            return false;
        }
        self.set_tracked_capture(None);
        for state in &joined {
            state.leave(id);
        }
        Stream::forget_joined(id);
        true
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(error = %e, "destroying a stream failed");
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Stream")
            .field("raw", &self.raw)
            .field("owned", &self.owned)
            .finish()
    }
}
