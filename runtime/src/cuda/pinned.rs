//! Pinned (page-locked) host memory, and the fences that keep the host away from it while
//! device work uses it.
//!
//! The soundness rule for pinned memory, enforced here and nowhere else:
//! - every enqueue that touches the memory outside a capture records a fence (one event per
//!   stream, re-recorded: a later record covers everything before it in that stream's order);
//!   a graph launch records one after the launch for every pinned allocation the graph
//!   touches;
//! - the host sees the memory (`&[T]` / `&mut [T]`) only after every fence has completed. The
//!   fences live in the allocation, not in a guard, so `mem::forget` of any guard cannot skip
//!   them;
//! - host slices are counted ([`BorrowCount`]) under the same mutex that a graph launch holds
//!   while it checks the count, enqueues and records its fences: a slice is either taken after
//!   the launch's fence (and waits for it) or seen by the launch, which then refuses to run;
//! - work that could be neither fenced nor waited for marks the memory lost: the host never
//!   sees it again, and it is leaked rather than freed;
//! - the memory is freed only when the last holder drops, after every fence completed.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytemuck::Pod;

use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys;

use super::memory::{BorrowCount, HostSlice, HostSliceMut, check_host_view};
use super::{Context, Event, Stream};

/// One fence per stream, by the driver's unique stream id (never reused).
type Fences = Vec<(u64, Event)>;

/// Page-locked host memory from `cuMemHostAlloc`.
///
/// Invariant: `ptr` is the first of `max(bytes, 1)` bytes allocated by `cuMemHostAlloc` in
/// `ctx`, zeroed or copied into at allocation (so always initialised), freed once in `Drop`
/// after every fence completed; the host reads or writes them only through [`HostSlice`]s
/// taken after the fences (the module's rule), the device only through work that records a
/// fence or is launched by a graph that does.
pub(crate) struct PinnedMemory {
    ctx: Arc<Context>,
    ptr: NonNull<u8>,
    bytes: usize,
    fences: Mutex<Fences>,
    /// Set when work touching this memory was enqueued but could be neither fenced nor
    /// waited for.
    lost: AtomicBool,
    borrows: BorrowCount,
}

// SAFETY: the memory is plain host memory; host access goes through slices taken after the
// fences, and the fence list is behind a mutex.
unsafe impl Send for PinnedMemory {}
// SAFETY: as above.
unsafe impl Sync for PinnedMemory {}

/// A pinned allocation's gate, held by a graph launch: while it is held no host slice can be
/// taken, and fences can be prepared and recorded.
pub(crate) struct PinnedGate<'a> {
    memory: &'a PinnedMemory,
    fences: MutexGuard<'a, Fences>,
}

impl PinnedGate<'_> {
    /// Whether a host slice of the memory is alive.
    pub(crate) fn is_borrowed(&self) -> bool {
        self.memory.borrows.is_borrowed()
    }

    /// See [`PinnedMemory::prepare_fence`].
    pub(crate) fn prepare_fence(&mut self, stream: &Stream) -> Result<()> {
        self.memory.prepare_in(&mut self.fences, stream)
    }

    /// See [`PinnedMemory::fence_after_enqueue`].
    pub(crate) fn fence_after_enqueue(&mut self, stream: &Stream) {
        self.memory.fence_after_in(&mut self.fences, stream)
    }
}

impl PinnedMemory {
    /// `bytes` of page-locked, portable host memory, initialised by `init` (which receives
    /// exactly `bytes` bytes).
    fn alloc_with(
        ctx: &Arc<Context>,
        bytes: usize,
        init: impl FnOnce(&mut [u8]),
    ) -> Result<PinnedMemory> {
        let d = ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; freed in Drop.
        check("cuMemHostAlloc", unsafe {
            (d.cuMemHostAlloc)(&mut raw, bytes.max(1), sys::CU_MEMHOSTALLOC_PORTABLE)
        })?;
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or_else(|| {
            Error::invalid(
                "PinnedBuffer::alloc",
                "cuMemHostAlloc returned a null pointer",
            )
        })?;
        // SAFETY: a fresh allocation of at least `bytes` bytes that nothing else sees yet; it
        // is zeroed before `init` sees it, so the slice is initialised.
        let fresh = unsafe {
            std::ptr::write_bytes(ptr.as_ptr(), 0, bytes);
            std::slice::from_raw_parts_mut(ptr.as_ptr(), bytes)
        };
        init(fresh);
        Ok(PinnedMemory {
            ctx: ctx.clone(),
            ptr,
            bytes,
            fences: Mutex::new(Vec::new()),
            lost: AtomicBool::new(false),
            borrows: BorrowCount::default(),
        })
    }

    /// `bytes` zeroed bytes.
    pub(crate) fn alloc(ctx: &Arc<Context>, bytes: usize) -> Result<PinnedMemory> {
        PinnedMemory::alloc_with(ctx, bytes, |_| {})
    }

    /// A pinned copy of `data`.
    pub(crate) fn alloc_copy(ctx: &Arc<Context>, data: &[u8]) -> Result<PinnedMemory> {
        PinnedMemory::alloc_with(ctx, data.len(), |fresh| fresh.copy_from_slice(data))
    }

    /// The context.
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The size in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The address of byte `offset` (`offset <= bytes`, which the buffer types guarantee),
    /// for copies.
    pub(crate) fn addr(&self, offset: usize) -> *mut u8 {
        self.ptr.as_ptr().wrapping_add(offset)
    }

    fn lock_fences(&self) -> MutexGuard<'_, Fences> {
        self.fences.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The gate a graph launch holds (see [`PinnedGate`]).
    pub(crate) fn gate(&self) -> PinnedGate<'_> {
        PinnedGate {
            memory: self,
            fences: self.lock_fences(),
        }
    }

    fn prepare_in(&self, fences: &mut Fences, stream: &Stream) -> Result<()> {
        if !fences.iter().any(|(id, _)| *id == stream.id()) {
            let event = Event::new(&self.ctx, sys::CU_EVENT_DISABLE_TIMING)?;
            fences.push((stream.id(), event));
        }
        Ok(())
    }

    /// Makes sure `stream` has a fence event, so that the [`fence_after_enqueue`] following an
    /// enqueue only records it. Call it before the enqueue: creating an event can fail, and it
    /// must not fail once work is in flight.
    ///
    /// [`fence_after_enqueue`]: PinnedMemory::fence_after_enqueue
    pub(crate) fn prepare_fence(&self, stream: &Stream) -> Result<()> {
        self.prepare_in(&mut self.lock_fences(), stream)
    }

    /// Records a fence on `stream` after the work just enqueued there that touches this
    /// memory (call it under the stream's gate, after every eager enqueue or graph launch that
    /// reads or writes it). It cannot fail, since the work is already enqueued: when recording
    /// the fence fails, it blocks until `stream` has drained instead, and when even that
    /// fails, marks the memory lost.
    pub(crate) fn fence_after_enqueue(&self, stream: &Stream) {
        self.fence_after_in(&mut self.lock_fences(), stream)
    }

    fn fence_after_in(&self, fences: &mut Fences, stream: &Stream) {
        let recorded = match fences.iter().find(|(id, _)| *id == stream.id()) {
            Some((_, event)) => stream.record_under_gate(event),
            None => Event::new(&self.ctx, sys::CU_EVENT_DISABLE_TIMING).and_then(|event| {
                stream.record_under_gate(&event)?;
                fences.push((stream.id(), event));
                Ok(())
            }),
        };
        let Err(e) = recorded else {
            return;
        };
        tracing::warn!(error = %e, "fencing pinned memory failed; waiting for the stream instead");
        if let Err(e) = stream.drain() {
            tracing::warn!(error = %e, "pinned memory is lost: its work can be neither fenced nor awaited");
            self.lost.store(true, Ordering::Release);
        }
    }

    /// Blocks until no enqueued work touches this memory any more. An asynchronous fault of
    /// that work is returned.
    pub(crate) fn wait_for_device(&self) -> Result<()> {
        self.wait_in(&self.lock_fences())
    }

    fn wait_in(&self, fences: &Fences) -> Result<()> {
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

    /// Whether any fence is still pending (without blocking).
    pub(crate) fn is_busy(&self) -> Result<bool> {
        if self.lost.load(Ordering::Acquire) {
            return Ok(true);
        }
        for (_, fence) in self.lock_fences().iter() {
            if !fence.query()? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Waits for every fence and counts a slice, under the gate a graph launch holds.
    fn begin_host_access(&self) -> Result<()> {
        let fences = self.lock_fences();
        self.wait_in(&fences)?;
        self.borrows.acquire();
        Ok(())
    }

    /// `len` elements of `T` from byte `offset`, for the host to read, after the fences.
    pub(crate) fn host_slice<T: Pod>(
        &self,
        call: &'static str,
        offset: usize,
        len: usize,
    ) -> Result<HostSlice<'_, T>> {
        check_host_view::<T>(call, self.ptr.as_ptr() as usize, self.bytes, offset, len)?;
        self.begin_host_access()?;
        // SAFETY: the range lies within the live allocation and is aligned for `T` (checked
        // above), its bytes are initialised (the type's invariant; `T: Pod` accepts any bits).
        // No enqueued work writes it now (every fence has completed), none that writes it can
        // be enqueued through safe code while the caller's shared borrow of the buffer lives,
        // and a graph launch checks the borrow counted above under the same mutex that ordered
        // it with the fence wait.
        let slice = unsafe { std::slice::from_raw_parts(self.addr(offset).cast::<T>(), len) };
        Ok(HostSlice::new(slice, &self.borrows))
    }

    /// The mutable form of [`PinnedMemory::host_slice`]; the caller holds the buffer
    /// exclusively.
    pub(crate) fn host_slice_mut<T: Pod>(
        &self,
        call: &'static str,
        offset: usize,
        len: usize,
    ) -> Result<HostSliceMut<'_, T>> {
        check_host_view::<T>(call, self.ptr.as_ptr() as usize, self.bytes, offset, len)?;
        self.begin_host_access()?;
        // SAFETY: as in `host_slice`; in addition no enqueued work reads the memory now, and
        // the caller's exclusive borrow keeps anything from enqueueing work on it, or taking
        // another slice, while this one lives.
        let slice = unsafe { std::slice::from_raw_parts_mut(self.addr(offset).cast::<T>(), len) };
        Ok(HostSliceMut::new(slice, &self.borrows))
    }
}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        if let Err(e) = self.wait_for_device() {
            // The device may still read or write it: leak rather than free under it.
            tracing::warn!(error = %e, bytes = self.bytes, "waiting for device work before freeing pinned memory failed; leaking it");
            return;
        }
        let Ok(d) = self.ctx.bind() else {
            tracing::warn!(
                bytes = self.bytes,
                "could not bind the context to free pinned memory; leaking it"
            );
            return;
        };
        // SAFETY: allocated by cuMemHostAlloc (the type's invariant); no fence is pending and
        // no holder remains.
        let code = unsafe { (d.cuMemFreeHost)(self.ptr.as_ptr().cast()) };
        if !code.is_success() {
            tracing::warn!(?code, "cuMemFreeHost failed while dropping pinned memory");
        }
    }
}

impl std::fmt::Debug for PinnedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedMemory")
            .field("ptr", &self.ptr)
            .field("bytes", &self.bytes)
            .finish()
    }
}
