//! The allocations behind every buffer, shared through `Arc` so that whatever may still use
//! the memory (a captured graph, a pending copy) keeps it alive.
//!
//! The soundness rule, enforced here and nowhere else:
//! - memory is freed only when the last holder drops, and the free first waits for all work
//!   that may touch it (device memory: the context is synchronized; pinned memory: its
//!   fences are waited on, then the context);
//! - the host sees pinned memory (`&[T]` / `&mut [T]`) only after every fence recorded for
//!   work that touches it has completed. The fences live in the allocation, not in a guard,
//!   so `mem::forget` of any guard cannot skip them.
//! - stream-ordered device memory is freed without a synchronize (`cuMemFreeAsync`) only
//!   when nothing else holds it and every enqueue that touched it went to the freeing stream
//!   outside any capture ([`plan_free`]); each allocation folds the streams of its uses into
//!   one atomic word for this ([`StreamUse`]).
//! - when the wait before a free fails, work may still use the memory: it is leaked, never
//!   freed.
//! - host slices of pinned and managed memory are guards ([`HostSlice`](super::HostSlice))
//!   counted in the allocation ([`BorrowCount`]); a graph launch, which borrows nothing,
//!   refuses to run while any is alive. The count is raised under the same mutex that a
//!   launch holds while it checks the count, enqueues and records its fences, so a slice is
//!   either taken after the launch's fence (and waits for it) or seen by the launch. A
//!   forgotten guard only makes later launches fail.
//!
//! On the host backend the memory is a [`HostMem`]: every host operation holds an `Arc` of
//! the memory it touches and locks it while it runs (see `host_mem.rs`), so a free there is
//! never early, whatever thread drops the last handle. Drops still wait for the context's
//! queued work first, as on CUDA.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::host_mem::HostMem;
use crate::context::Context;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::event::{Event, EventFlags};
use crate::host::Access;
use crate::stream::Stream;
use crate::sys;

/// How a device allocation was made, which decides how it may be freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllocKind {
    /// `cuMemAlloc`: usable on any stream at once; freed after a context synchronize.
    Plain,
    /// `cuMemAllocAsync` / `cuMemAllocFromPoolAsync`: valid from its allocating stream's
    /// point on; may be freed in stream order (see [`plan_free`]).
    StreamOrdered,
    /// `cuMemAllocManaged` (attached globally): one address for host and device.
    Managed,
}

/// How [`Stream::free_async`](crate::Stream::free_async) released a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FreeMode {
    /// `cuMemFreeAsync` on the given stream: the allocation was stream-ordered, every piece
    /// of work that touched it was enqueued on that stream, and nothing else held it. The
    /// call returned without waiting.
    StreamOrdered,
    /// The context was synchronized and the memory freed at once: the allocation was used on
    /// more than one stream (or inside a capture), or was not stream-ordered.
    Synchronized,
    /// Something else still holds the allocation (a captured graph, or the graph being
    /// captured on this stream); the last holder frees it, by the rules above.
    Deferred,
}

/// The streams an allocation's work has been enqueued on, folded into one word: none yet,
/// exactly one (its id + 1), or several ([`StreamUse::SHARED`]). Work enqueued during a
/// capture counts as shared: the graph may later be launched on any stream.
pub(crate) struct StreamUse(AtomicU64);

impl StreamUse {
    const UNUSED: u64 = 0;
    pub(crate) const SHARED: u64 = u64::MAX;

    fn new(first: u64) -> StreamUse {
        StreamUse(AtomicU64::new(first))
    }

    /// The word for work on the stream with this driver id. The two ids that would collide
    /// with the markers (never seen in practice) count as shared, which is always safe.
    pub(crate) fn tag(stream_id: u64) -> u64 {
        match stream_id.checked_add(1) {
            Some(tag) if tag != Self::SHARED => tag,
            _ => Self::SHARED,
        }
    }

    /// The word for work enqueued on `stream` now.
    fn tag_of(stream: &Stream) -> u64 {
        if stream.tracked_capture().is_some() {
            Self::SHARED
        } else {
            Self::tag(stream.unique_id())
        }
    }

    /// The state after one more use with `tag`.
    pub(crate) fn merge(current: u64, tag: u64) -> u64 {
        if current == Self::UNUSED || current == tag {
            tag
        } else {
            Self::SHARED
        }
    }

    fn record(&self, tag: u64) {
        // The closure never declines when the state changes; an unchanged state needs no store.
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                let next = Self::merge(current, tag);
                (next != current).then_some(next)
            });
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// The stream-ordered free rule, for an allocation nobody else holds (`kind`, its folded
/// stream use `uses`, the freeing stream's tag, and whether that stream is capturing):
/// - capturing: hand it to the graph being captured (freeing there would add a free node,
///   which CUDA accepts only for memory the graph itself allocated);
/// - stream-ordered and every use on exactly the freeing stream: `cuMemFreeAsync` there, since
///   all work that touches it precedes the free in that stream's order;
/// - otherwise: synchronize the context, then free (work on another stream, or a graph
///   launched anywhere, may still use it).
pub(crate) fn plan_free(kind: AllocKind, uses: u64, stream_tag: u64, capturing: bool) -> FreeMode {
    if capturing {
        FreeMode::Deferred
    } else if kind == AllocKind::StreamOrdered
        && uses == stream_tag
        && stream_tag != StreamUse::SHARED
    {
        FreeMode::StreamOrdered
    } else {
        FreeMode::Synchronized
    }
}

/// Whether memory of context `a` may be used by work of context `b`: the same `Context`, or
/// two handles to the same driver context (`Context::cuda(0)` twice gives the one primary
/// context).
pub(crate) fn same_memory_space(a: &Context, b: &Context) -> bool {
    a.same_as(b) || (a.handle().is_some() && a.handle() == b.handle())
}

/// How many host slices of an allocation are alive (see the module docs). Raised only under
/// the allocation's gate mutex; lowered by the slice's drop.
#[derive(Debug, Default)]
pub(crate) struct BorrowCount(AtomicUsize);

impl BorrowCount {
    /// One more slice; call it under the allocation's gate.
    pub(crate) fn acquire(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// A slice was dropped.
    pub(crate) fn release(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether any slice is alive; meaningful under the allocation's gate.
    pub(crate) fn is_borrowed(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}

/// The error of a graph launch that finds a host slice of its memory alive.
pub(crate) fn borrowed_error(call: &'static str, what: &str) -> Error {
    Error::invalid(
        call,
        format!(
            "a host slice of {what} memory this graph touches is alive (from `as_slice` or \
             `as_mut_slice`); drop the slice before launching"
        ),
    )
}

/// Reports a host access to the race detector of a checked host context.
fn report_host_access(mem: Option<&Arc<HostMem>>, access: Access) -> Result<()> {
    let Some(mem) = mem else {
        return Ok(());
    };
    let verb = if access.is_write() { "write" } else { "read" };
    let label = format!("host {verb} of {}", mem.name());
    Ok(mem
        .host_context()
        .host_access(label, &[(mem.id(), access)])?)
}

/// Waits for the work queued in `ctx` before memory is freed. CUDA: a context synchronize,
/// whose failure means work may still use the memory. Host: every queued operation has run
/// (faults stay for the next synchronize); inside an operation nothing can be waited for,
/// which is fine there since operations hold the memory they touch.
fn wait_before_free(ctx: &Context) -> Result<()> {
    match ctx.host_context() {
        Some(host) => {
            host.wait_idle();
            Ok(())
        }
        None => ctx.synchronize(),
    }
}

/// Device memory: from `cuMemAlloc`, the stream-ordered allocator or `cuMemAllocManaged`
/// (see `kind`), or a heap allocation on the host backend (`host`).
///
/// Hooks for code that enqueues work on it (copies, kernel launches, graph nodes): call
/// [`DeviceAlloc::note_use`] with the stream before every enqueue that bakes its address into
/// work, and `stream.keep_alive_in_capture(|| KeepAlive::Device(arc.clone()))` too;
/// [`DeviceAlloc::enqueued_on`] does both.
pub(crate) struct DeviceAlloc {
    pub(crate) ctx: Context,
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) bytes: usize,
    pub(crate) kind: AllocKind,
    uses: StreamUse,
    /// Set once `cuMemFreeAsync` took the memory, so Drop frees nothing.
    freed: bool,
    /// The memory on the host backend (`ptr` is then its address).
    pub(crate) host: Option<Arc<HostMem>>,
    /// Orders host access to managed memory with graph launches (see `BorrowCount`).
    gate: Mutex<()>,
    /// Host slices of managed memory alive now.
    pub(crate) borrows: BorrowCount,
}

// SAFETY: a device address is a plain integer usable from any thread; the driver frees it
// once. Host memory is a `HostMem`, itself Send + Sync.
unsafe impl Send for DeviceAlloc {}
// SAFETY: as above; the interior mutability is atomics and mutexes.
unsafe impl Sync for DeviceAlloc {}

impl DeviceAlloc {
    fn wrap(
        ctx: &Context,
        ptr: sys::CUdeviceptr,
        bytes: usize,
        kind: AllocKind,
        uses: u64,
    ) -> Self {
        DeviceAlloc {
            ctx: ctx.clone(),
            ptr,
            bytes,
            kind,
            uses: StreamUse::new(uses),
            freed: false,
            host: None,
            gate: Mutex::new(()),
            borrows: BorrowCount::default(),
        }
    }

    /// A host-backend allocation of `bytes` (zeroed), named `<what> #n` in race reports.
    fn new_host(
        call: &'static str,
        ctx: &Context,
        bytes: usize,
        kind: AllocKind,
        uses: u64,
    ) -> Result<Option<DeviceAlloc>> {
        let Some(host) = ctx.host_context() else {
            return Ok(None);
        };
        let what = if kind == AllocKind::Managed {
            "managed buffer"
        } else {
            "device buffer"
        };
        let mem = HostMem::new(call, host, bytes, what)?;
        let mut alloc = DeviceAlloc::wrap(ctx, mem.address(), bytes, kind, uses);
        alloc.host = Some(mem);
        Ok(Some(alloc))
    }

    /// `bytes` of device memory (at least one byte is requested, so the address is unique).
    pub(crate) fn new(ctx: &Context, bytes: usize) -> Result<DeviceAlloc> {
        const CALL: &str = "DeviceBuffer::alloc";
        if let Some(alloc) =
            DeviceAlloc::new_host(CALL, ctx, bytes, AllocKind::Plain, StreamUse::UNUSED)?
        {
            return Ok(alloc);
        }
        let c = ctx.bound_cuda(CALL)?;
        let mut ptr = 0;
        // SAFETY: a valid out-pointer; freed in Drop.
        check("cuMemAlloc", unsafe {
            (c.driver.cuMemAlloc)(&mut ptr, bytes.max(1))
        })?;
        Ok(DeviceAlloc::wrap(
            ctx,
            ptr,
            bytes,
            AllocKind::Plain,
            StreamUse::UNUSED,
        ))
    }

    /// `bytes` of device memory allocated in `stream`'s order, from `pool` or (with `None`)
    /// the device's current pool. The allocation counts as used on `stream`.
    pub(crate) fn new_async(
        stream: &Stream,
        bytes: usize,
        pool: Option<sys::CUmemoryPool>,
    ) -> Result<DeviceAlloc> {
        // The host's heap needs no stream order: the memory is valid at once.
        let uses = StreamUse::tag_of(stream);
        if let Some(alloc) = DeviceAlloc::new_host(
            "Stream::alloc_async",
            stream.context(),
            bytes,
            AllocKind::StreamOrdered,
            uses,
        )? {
            return Ok(alloc);
        }
        let (c, raw) = stream.cuda("Stream::alloc_async")?;
        let mut ptr = 0;
        let code = match pool {
            // SAFETY: a valid out-pointer and live stream; `pool` is a live pool of this
            // context's device (the caller checked the context); freed in Drop or free_async.
            Some(pool) => unsafe {
                (c.driver.cuMemAllocFromPoolAsync)(&mut ptr, bytes.max(1), pool, raw)
            },
            // SAFETY: a valid out-pointer and live stream; freed in Drop or free_async.
            None => unsafe { (c.driver.cuMemAllocAsync)(&mut ptr, bytes.max(1), raw) },
        };
        let call = if pool.is_some() {
            "cuMemAllocFromPoolAsync"
        } else {
            "cuMemAllocAsync"
        };
        check(call, code)?;
        Ok(DeviceAlloc::wrap(
            stream.context(),
            ptr,
            bytes,
            AllocKind::StreamOrdered,
            uses,
        ))
    }

    /// `bytes` of managed memory, attached globally (any stream, and the host, may use it).
    pub(crate) fn new_managed(ctx: &Context, bytes: usize) -> Result<DeviceAlloc> {
        const CALL: &str = "ManagedBuffer::new";
        if let Some(alloc) =
            DeviceAlloc::new_host(CALL, ctx, bytes, AllocKind::Managed, StreamUse::UNUSED)?
        {
            return Ok(alloc);
        }
        let c = ctx.bound_cuda(CALL)?;
        let mut ptr = 0;
        // SAFETY: a valid out-pointer and a documented flag; freed in Drop.
        check("cuMemAllocManaged", unsafe {
            (c.driver.cuMemAllocManaged)(&mut ptr, bytes.max(1), sys::CU_MEM_ATTACH_GLOBAL)
        })?;
        Ok(DeviceAlloc::wrap(
            ctx,
            ptr,
            bytes,
            AllocKind::Managed,
            StreamUse::UNUSED,
        ))
    }

    /// Records that work touching this memory is about to be enqueued on `stream`. Call it
    /// before the enqueue (a use recorded for work that then fails to enqueue only makes the
    /// eventual free more conservative).
    pub(crate) fn note_use(&self, stream: &Stream) {
        self.uses.record(StreamUse::tag_of(stream));
    }

    /// [`note_use`](Self::note_use) plus keeping the allocation alive in the graph being
    /// captured on `stream`, if any: what every enqueue touching it calls first.
    pub(crate) fn enqueued_on(self: &Arc<Self>, stream: &Stream) {
        self.note_use(stream);
        stream.keep_alive_in_capture(|| KeepAlive::Device(Arc::clone(self)));
    }

    /// Frees `this` by the rule of [`plan_free`] if it is the last holder; else drops this
    /// reference and reports [`FreeMode::Deferred`].
    pub(crate) fn free_on(this: Arc<Self>, stream: &Stream) -> Result<FreeMode> {
        if !same_memory_space(&this.ctx, stream.context()) {
            return Err(Error::invalid(
                "Stream::free_async",
                "the buffer belongs to another context than the stream",
            ));
        }
        // Asked of the driver, not our tracking: freeing inside a capture would add a free
        // node for memory the graph did not allocate, which CUDA rejects.
        let capture = stream.capture_id()?;
        let Ok(mut alloc) = Arc::try_unwrap(this) else {
            return Ok(FreeMode::Deferred);
        };
        let mode = plan_free(
            alloc.kind,
            alloc.uses.get(),
            StreamUse::tag(stream.unique_id()),
            capture.is_some(),
        );
        if alloc.host.is_some() && mode != FreeMode::Synchronized {
            // Host operations hold the memory they touch: dropping our reference frees it
            // once the last one (all enqueued on this stream, or none) has run.
            alloc.release_host();
            return Ok(mode);
        }
        match mode {
            FreeMode::Deferred => {
                // The graph being captured frees it when dropped. (A capture that foreign code
                // started and ends never collects it: then it is leaked, which is safe.)
                if let Some(id) = capture {
                    stream.keep_alive_in_capture_id(id, KeepAlive::Device(Arc::new(alloc)));
                }
            }
            FreeMode::StreamOrdered => {
                let (c, raw) = stream.cuda("Stream::free_async")?;
                // SAFETY: a stream-ordered allocation of this context that no one else holds;
                // all work touching it was enqueued on `raw` (see plan_free), so the free
                // follows it in stream order.
                check("cuMemFreeAsync", unsafe {
                    (c.driver.cuMemFreeAsync)(alloc.ptr, raw)
                })?;
                alloc.freed = true;
            }
            FreeMode::Synchronized => alloc.free_now()?,
        }
        Ok(mode)
    }

    /// Synchronizes the context, then frees. When the synchronize fails, work may still use
    /// the memory, so it is leaked instead (an error here usually means the context is lost).
    fn free_now(&mut self) -> Result<()> {
        if self.freed {
            return Ok(());
        }
        if self.host.is_some() {
            let waited = wait_before_free(&self.ctx);
            self.release_host();
            return waited;
        }
        // Work enqueued on any stream may still read or write this memory: wait for it all.
        if let Err(e) = self.ctx.synchronize() {
            self.freed = true; // leaked: never free what may be in use
            return Err(e);
        }
        self.freed = true;
        let c = self.ctx.bound_cuda("DeviceBuffer::drop")?;
        // SAFETY: allocated by cuMemAlloc / cuMemAllocAsync / cuMemAllocManaged (cuMemFree
        // takes all three); nothing can use it any more (see above), and `freed` stops a
        // second free.
        check("cuMemFree", unsafe { (c.driver.cuMemFree)(self.ptr) })
    }
}

impl DeviceAlloc {
    /// Drops this handle's reference to host memory (freed when no operation holds it).
    fn release_host(&mut self) {
        self.freed = true;
        self.host = None;
    }

    /// Starts a host access to managed memory: synchronizes the context and counts a slice,
    /// under the gate a graph launch holds (see `BorrowCount`).
    pub(crate) fn begin_host_access(&self, access: Access) -> Result<()> {
        let _gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        self.ctx.synchronize()?;
        report_host_access(self.host.as_ref(), access)?;
        self.borrows.acquire();
        Ok(())
    }

    /// The gate a graph launch holds while it checks for host slices and enqueues.
    pub(crate) fn gate(&self) -> MutexGuard<'_, ()> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        if let Err(e) = self.free_now() {
            tracing::warn!(error = %e, bytes = self.bytes, "freeing device memory failed (leaked if work may still use it)");
        }
    }
}

impl std::fmt::Debug for DeviceAlloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceAlloc")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("bytes", &self.bytes)
            .field("kind", &self.kind)
            .finish()
    }
}

/// Page-locked host memory from `cuMemHostAlloc`, with the fences of pending device work.
pub(crate) struct PinnedAlloc {
    pub(crate) ctx: Context,
    pub(crate) ptr: *mut u8,
    pub(crate) bytes: usize,
    /// One event per stream (by the driver's unique stream id, never reused), re-recorded after each enqueue there that touches this memory
    /// (a later record on a stream covers everything before it, in stream order). The host
    /// waits on all of them before it reads or writes.
    fences: Mutex<Vec<(u64, Event)>>,
    /// Set when work touching this memory was enqueued but could be neither fenced nor
    /// waited for: the host may never see the memory again, and it is leaked, not freed.
    lost: AtomicBool,
    /// The memory on the host backend (`ptr` is then its first byte).
    pub(crate) host: Option<Arc<HostMem>>,
    /// Host slices alive now; raised under the `fences` mutex, which is the gate.
    pub(crate) borrows: BorrowCount,
}

// SAFETY: the memory is plain host memory; host access goes through `&`/`&mut` of the buffer
// after `wait_for_device`, which serialises with the device through the fences.
unsafe impl Send for PinnedAlloc {}
// SAFETY: as above; the fence list is behind a Mutex.
unsafe impl Sync for PinnedAlloc {}

/// A pinned allocation's gate, held by a graph launch: while it is held no host slice can be
/// taken, and fences can be prepared and recorded.
pub(crate) struct PinnedGate<'a> {
    alloc: &'a PinnedAlloc,
    fences: MutexGuard<'a, Vec<(u64, Event)>>,
}

impl PinnedGate<'_> {
    /// Whether a host slice of the memory is alive.
    pub(crate) fn is_borrowed(&self) -> bool {
        self.alloc.borrows.is_borrowed()
    }

    /// See [`PinnedAlloc::prepare_fence`].
    pub(crate) fn prepare_fence(&mut self, stream: &Stream) -> Result<()> {
        self.alloc.prepare_in(&mut self.fences, stream)
    }

    /// See [`PinnedAlloc::fence_after_enqueue`].
    pub(crate) fn fence_after_enqueue(&mut self, stream: &Stream) {
        self.alloc.fence_after_enqueue_in(&mut self.fences, stream)
    }
}

impl PinnedAlloc {
    /// `bytes` of page-locked, portable host memory.
    pub(crate) fn new(ctx: &Context, bytes: usize) -> Result<PinnedAlloc> {
        const CALL: &str = "PinnedBuffer::alloc";
        if let Some(host) = ctx.host_context() {
            let mem = HostMem::new(CALL, host, bytes, "pinned buffer")?;
            return Ok(PinnedAlloc {
                ctx: ctx.clone(),
                ptr: mem.ptr().as_ptr(),
                bytes,
                fences: Mutex::new(Vec::new()),
                lost: AtomicBool::new(false),
                host: Some(mem),
                borrows: BorrowCount::default(),
            });
        }
        let c = ctx.bound_cuda(CALL)?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; freed in Drop.
        check("cuMemHostAlloc", unsafe {
            (c.driver.cuMemHostAlloc)(&mut ptr, bytes.max(1), sys::CU_MEMHOSTALLOC_PORTABLE)
        })?;
        Ok(PinnedAlloc {
            ctx: ctx.clone(),
            ptr: ptr.cast(),
            bytes,
            fences: Mutex::new(Vec::new()),
            lost: AtomicBool::new(false),
            host: None,
            borrows: BorrowCount::default(),
        })
    }

    fn lock_fences(&self) -> MutexGuard<'_, Vec<(u64, Event)>> {
        self.fences.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The gate a graph launch holds (see [`PinnedGate`]).
    pub(crate) fn gate(&self) -> PinnedGate<'_> {
        PinnedGate {
            alloc: self,
            fences: self.lock_fences(),
        }
    }

    fn fence_in(&self, fences: &mut Vec<(u64, Event)>, stream: &Stream) -> Result<()> {
        if let Some((_, event)) = fences.iter().find(|(id, _)| *id == stream.unique_id()) {
            return stream.record_into(event);
        }
        let event = Event::with_flags(&self.ctx, EventFlags::ORDERING)?;
        stream.record_into(&event)?;
        fences.push((stream.unique_id(), event));
        Ok(())
    }

    fn prepare_in(&self, fences: &mut Vec<(u64, Event)>, stream: &Stream) -> Result<()> {
        if !fences.iter().any(|(id, _)| *id == stream.unique_id()) {
            let event = Event::with_flags(&self.ctx, EventFlags::ORDERING)?;
            fences.push((stream.unique_id(), event));
        }
        Ok(())
    }

    /// Makes sure `stream` has a fence event, so that the
    /// [`fence_after_enqueue`](Self::fence_after_enqueue) following an enqueue only records
    /// it. Call it before the enqueue: creating an event can fail, and it must not fail once
    /// work is in flight.
    pub(crate) fn prepare_fence(&self, stream: &Stream) -> Result<()> {
        self.prepare_in(&mut self.lock_fences(), stream)
    }

    /// Records a fence on `stream` after the work just enqueued there that touches this
    /// memory (call it after every enqueue or graph launch that reads or writes it). It
    /// cannot fail, since the work is already enqueued: when recording the fence fails, it
    /// blocks until `stream` has drained instead, and when even that fails, marks the memory
    /// lost (host access errors, Drop leaks it).
    pub(crate) fn fence_after_enqueue(&self, stream: &Stream) {
        self.fence_after_enqueue_in(&mut self.lock_fences(), stream)
    }

    fn fence_after_enqueue_in(&self, fences: &mut Vec<(u64, Event)>, stream: &Stream) {
        let Err(e) = self.fence_in(fences, stream) else {
            return;
        };
        tracing::warn!(error = %e, "fencing pinned memory failed; waiting for the stream instead");
        if stream.host.is_some() {
            // A host record fails only on misuse; without a fence the host may never see
            // the memory again.
            tracing::warn!("pinned memory is lost: its host-backend work could not be fenced");
            self.lost.store(true, Ordering::Release);
            return;
        }
        let drained = stream.cuda("PinnedBuffer::fence").and_then(|(c, raw)| {
            // SAFETY: a live stream of a bound context.
            check("cuStreamSynchronize", unsafe {
                (c.driver.cuStreamSynchronize)(raw)
            })
        });
        if let Err(e) = drained {
            tracing::warn!(error = %e, "pinned memory is lost: its work can be neither fenced nor awaited");
            self.lost.store(true, Ordering::Release);
        }
    }

    /// Blocks until no enqueued work touches this memory any more. Errors from the device
    /// (an asynchronous fault) are returned.
    pub(crate) fn wait_for_device(&self) -> Result<()> {
        self.wait_in(&self.lock_fences())
    }

    fn wait_in(&self, fences: &[(u64, Event)]) -> Result<()> {
        if self.lost.load(Ordering::Acquire) {
            return Err(Error::invalid(
                "PinnedBuffer",
                "work touching this pinned memory could not be fenced or awaited, so the host \
                 may not access it any more",
            ));
        }
        let mut first_error = None;
        // The events stay for reuse: a completed event is cheap to wait on again.
        for (_, fence) in fences.iter() {
            if let Err(e) = fence.synchronize() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Starts a host access: waits for every fence and counts a slice, under the gate a
    /// graph launch holds (see `BorrowCount`).
    pub(crate) fn begin_host_access(&self, access: Access) -> Result<()> {
        let fences = self.lock_fences();
        self.wait_in(&fences)?;
        report_host_access(self.host.as_ref(), access)?;
        self.borrows.acquire();
        Ok(())
    }

    /// Whether any fence is still pending (without blocking).
    pub(crate) fn is_busy(&self) -> Result<bool> {
        if self.lost.load(Ordering::Acquire) {
            return Ok(true);
        }
        let fences = self.lock_fences();
        for (_, fence) in fences.iter() {
            if !fence.query()? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl std::fmt::Debug for PinnedAlloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedAlloc")
            .field("ptr", &self.ptr)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        if let Some(mem) = self.host.take() {
            // Host operations hold the memory they touch, so freeing is never early; the wait
            // keeps CUDA's blocking behaviour (and fails harmlessly inside an operation).
            if let Err(e) = self.wait_for_device() {
                tracing::debug!(error = %e, "pinned host-backend memory dropped without waiting");
            }
            drop(mem);
            return;
        }
        if let Err(e) = self.wait_for_device() {
            // The device may still read or write it: leak rather than free under it.
            tracing::warn!(error = %e, bytes = self.bytes, "waiting for device work before freeing pinned memory failed; leaking it");
            return;
        }
        let Ok(c) = self.ctx.bound_cuda("PinnedBuffer::drop") else {
            return;
        };
        // SAFETY: allocated by cuMemHostAlloc; no fence is pending and no holder remains.
        let code = unsafe { (c.driver.cuMemFreeHost)(self.ptr.cast()) };
        if !code.is_success() {
            tracing::warn!(?code, "cuMemFreeHost failed while dropping pinned memory");
        }
    }
}

/// Something a captured graph's nodes point at, kept alive by the graph (and by every
/// executable graph instantiated from it) for as long as it can be launched.
#[derive(Clone)]
pub(crate) enum KeepAlive {
    /// Device memory a node reads or writes.
    Device(Arc<DeviceAlloc>),
    /// Pinned host memory a node copies from or to: each launch also fences it, so the host
    /// waits for the launch before touching the memory.
    Pinned(Arc<PinnedAlloc>),
    /// Anything else (a host closure, a loaded module).
    Object(Arc<dyn Any + Send + Sync>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_use_folds_to_one_stream_or_shared() {
        let (a, b) = (StreamUse::tag(7), StreamUse::tag(9));
        assert_ne!(a, b);
        assert_eq!(StreamUse::merge(StreamUse::UNUSED, a), a);
        assert_eq!(StreamUse::merge(a, a), a);
        assert_eq!(StreamUse::merge(a, b), StreamUse::SHARED);
        assert_eq!(StreamUse::merge(StreamUse::SHARED, a), StreamUse::SHARED);
        assert_eq!(StreamUse::merge(a, StreamUse::SHARED), StreamUse::SHARED);
        // Ids that would collide with the markers count as shared.
        assert_eq!(StreamUse::tag(u64::MAX), StreamUse::SHARED);
        assert_eq!(StreamUse::tag(u64::MAX - 1), StreamUse::SHARED);
        assert_ne!(StreamUse::tag(0), StreamUse::UNUSED);
    }

    #[test]
    fn stream_use_records_atomically() {
        let uses = StreamUse::new(StreamUse::UNUSED);
        uses.record(StreamUse::tag(1));
        uses.record(StreamUse::tag(1));
        assert_eq!(uses.get(), StreamUse::tag(1));
        uses.record(StreamUse::tag(2));
        assert_eq!(uses.get(), StreamUse::SHARED);
        uses.record(StreamUse::tag(1));
        assert_eq!(uses.get(), StreamUse::SHARED);
    }

    #[test]
    fn free_plan_is_stream_ordered_only_for_single_stream_pool_memory() {
        use AllocKind::*;
        let s = StreamUse::tag(3);
        let t = StreamUse::tag(4);
        assert_eq!(
            plan_free(StreamOrdered, s, s, false),
            FreeMode::StreamOrdered
        );
        assert_eq!(
            plan_free(StreamOrdered, t, s, false),
            FreeMode::Synchronized
        );
        assert_eq!(
            plan_free(StreamOrdered, StreamUse::SHARED, s, false),
            FreeMode::Synchronized
        );
        assert_eq!(
            plan_free(StreamOrdered, StreamUse::SHARED, StreamUse::SHARED, false),
            FreeMode::Synchronized
        );
        assert_eq!(plan_free(StreamOrdered, s, s, true), FreeMode::Deferred);
        assert_eq!(plan_free(Plain, s, s, false), FreeMode::Synchronized);
        assert_eq!(plan_free(Managed, s, s, false), FreeMode::Synchronized);
        assert_eq!(plan_free(Plain, s, s, true), FreeMode::Deferred);
    }
}
