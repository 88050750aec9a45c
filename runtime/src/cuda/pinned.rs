//! Pinned (page-locked) host memory, and the fences that keep the host away from it while
//! device work uses it.
//!
//! The soundness rule for pinned memory, enforced here and nowhere else:
//! - every enqueue that touches the memory outside a capture leaves a fence in it: a number of
//!   its stream's fence sequence (`fence.rs`), one per stream, replaced by later ones (a later
//!   number covers everything before it in that stream's order); a graph launch leaves one
//!   after the launch in every pinned allocation the graph touches. Marking a fence makes no
//!   driver call on a stream this crate owns: the fence is recorded or awaited only when
//!   something needs it;
//! - the host sees the memory (`&[T]` / `&mut [T]`) only after every fence has completed. The
//!   fences live in the allocation, not in a guard, so `mem::forget` of any guard cannot skip
//!   them;
//! - host slices are counted ([`BorrowCount`]) under the same mutex that a graph launch holds
//!   while it checks the count, enqueues and records its fences: a slice is either taken after
//!   the launch's fence (and waits for it) or seen by the launch, which then refuses to run;
//! - work that could be neither fenced nor waited for marks the memory lost: the host never
//!   sees it again, and it is leaked rather than freed;
//! - the memory is freed only when the last holder drops, after every fence completed.
//!
//! The memory has one of two origins, and the rule holds for both alike (every method below
//! but allocation and release is blind to the origin):
//! - `cuMemHostAlloc`: the crate allocates it and frees it with `cuMemFreeHost`;
//! - a `Vec` the user hands over (`PinnedBuffer::register`): its heap block, page-locked in
//!   place with `cuMemHostRegister`. Owning the `Vec` is what keeps the block from moving or
//!   being freed while it is registered: no one else can reach it. Releasing it waits for the
//!   fences, unregisters, and then either frees the block as the `Vec` it was or hands that
//!   `Vec` back (`into_vec`, when no graph still holds the memory). A block that could not be
//!   unregistered is leaked, never freed, so the allocator cannot reuse pages the driver may
//!   still treat as pinned.

use std::any::TypeId;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytemuck::Pod;

use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys;

use super::memory::{BorrowCount, HostSlice, HostSliceMut, check_host_view};
use super::{Context, Fence, Stream};

/// At most one fence per stream handle (the latest: it covers the earlier ones).
type Fences = Vec<Fence>;

/// Why registering a `Vec` failed, with the `Vec`, untouched.
pub(crate) type Refused<T> = Box<(Error, Vec<T>)>;

/// The raw parts of a user's `Vec<T>` (pointer aside), with what it takes to rebuild it.
#[derive(Clone, Copy, Debug)]
struct VecParts {
    len: usize,
    capacity: usize,
    elem: TypeId,
    /// Rebuilds the `Vec<T>` from the parts and drops it (see [`free_vec`]).
    free: unsafe fn(NonNull<u8>, usize, usize),
}

/// Where the memory came from, which decides how it is released.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// `cuMemHostAlloc`: freed with `cuMemFreeHost`.
    HostAlloc,
    /// A user's `Vec`, page-locked with `cuMemHostRegister` when `registered`.
    Vec { parts: VecParts, registered: bool },
    /// Nothing is left to release: the `Vec` was handed back (`into_vec`).
    Released,
}

/// Rebuilds a `Vec<T>` from its raw parts and drops it, freeing its block with its own
/// layout.
///
/// # Safety
/// `ptr`, `len` and `capacity` are the parts of a `Vec<T>` given up with `ManuallyDrop`,
/// used at most once.
unsafe fn free_vec<T>(ptr: NonNull<u8>, len: usize, capacity: usize) {
    // SAFETY: the caller's contract is exactly `Vec::from_raw_parts`'s.
    drop(unsafe { Vec::from_raw_parts(ptr.as_ptr().cast::<T>(), len, capacity) });
}

/// Page-locked host memory: from `cuMemHostAlloc`, or a user's `Vec` registered in place.
///
/// Invariant, per `origin`:
/// - `HostAlloc`: `ptr` is the first of `max(bytes, 1)` bytes allocated by `cuMemHostAlloc`
///   in `ctx`, zeroed or copied into at allocation, freed once in `Drop`;
/// - `Vec { parts, registered }`: `ptr`, `parts.len` and `parts.capacity` are the raw parts
///   of a `Vec<E>` (`TypeId::of::<E>() == parts.elem`, `bytes == parts.len *
///   size_of::<E>()`) that the crate alone owns, so its block neither moves nor is freed
///   until `Drop` or `into_vec` rebuilds the `Vec` (once); `registered` is true exactly
///   when `bytes > 0` and `cuMemHostRegister` page-locked `[ptr, ptr + bytes)`. When
///   `bytes == 0`, `ptr` may be dangling (aligned and non-null, as a `Vec`'s is) and no
///   device work can touch a byte of it;
/// - `Released`: the parts were handed back; nothing is touched or freed again.
///
/// For every origin the `bytes` bytes at `ptr` are initialised (zeroed, copied into, or a
/// `Vec`'s elements), and while the memory is live the host reads or writes them only
/// through [`HostSlice`]s taken after the fences (the module's rule), the device only
/// through work that records a fence or is launched by a graph that does; the memory is
/// released only after every fence completed.
pub(crate) struct PinnedMemory {
    ctx: Arc<Context>,
    ptr: NonNull<u8>,
    bytes: usize,
    origin: Origin,
    fences: Mutex<Fences>,
    /// Set when work touching this memory was enqueued but could be neither fenced nor
    /// waited for.
    lost: AtomicBool,
    borrows: BorrowCount,
}

// SAFETY: the memory is plain host memory; host access goes through slices taken after the
// fences, and the fence list is behind a mutex. A registered `Vec`'s elements are `Pod`
// (`Copy`, so without drop glue): freeing it on another thread runs no code of its element
// type, and `PinnedBuffer::register` asks `Send + Sync` of that type for the host's slices.
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

    /// Keeps `fence`, marked once for an enqueue that touches several allocations (see
    /// [`PinnedMemory::fence_after_enqueue`]); `None`, a fence that could not be marked, loses
    /// the memory.
    pub(crate) fn keep_fence(&mut self, fence: Option<&Fence>) {
        self.memory.keep_in(&mut self.fences, fence)
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
            origin: Origin::HostAlloc,
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

    /// `data` itself, page-locked in place with `cuMemHostRegister` (portable, like
    /// `cuMemHostAlloc` memory). Nothing is registered for zero bytes (an empty `Vec` or
    /// zero-sized elements), which the driver refuses and no copy touches. On failure the
    /// `Vec` comes back with the error, untouched.
    pub(crate) fn register<T: Pod>(
        ctx: &Arc<Context>,
        data: Vec<T>,
    ) -> std::result::Result<PinnedMemory, Refused<T>> {
        let bytes = std::mem::size_of_val(data.as_slice());
        // The crate takes the block over: the `Vec` is given up (handed back on failure).
        let mut data = std::mem::ManuallyDrop::new(data);
        // A `Vec`'s pointer is never null (dangling but aligned when nothing is allocated).
        let Some(ptr) = NonNull::new(data.as_mut_ptr().cast::<u8>()) else {
            let e = Error::invalid("PinnedBuffer::register", "the Vec has a null pointer");
            return Err(Box::new((e, std::mem::ManuallyDrop::into_inner(data))));
        };
        if bytes > 0 {
            let registered = ctx.bind().and_then(|d| {
                // SAFETY: `[ptr, ptr + bytes)` are the initialised elements of `data`, a live
                // heap block; the driver only page-locks it here (no access yet).
                check("cuMemHostRegister", unsafe {
                    (d.cuMemHostRegister)(
                        ptr.as_ptr().cast(),
                        bytes,
                        sys::CU_MEMHOSTREGISTER_PORTABLE,
                    )
                })
            });
            if let Err(e) = registered {
                return Err(Box::new((e, std::mem::ManuallyDrop::into_inner(data))));
            }
        }
        let parts = VecParts {
            len: data.len(),
            capacity: data.capacity(),
            elem: TypeId::of::<T>(),
            free: free_vec::<T>,
        };
        Ok(PinnedMemory {
            ctx: ctx.clone(),
            ptr,
            bytes,
            origin: Origin::Vec {
                parts,
                registered: bytes > 0,
            },
            fences: Mutex::new(Vec::new()),
            lost: AtomicBool::new(false),
            borrows: BorrowCount::default(),
        })
    }

    /// The first `len` elements of `T` as a `Vec`, for `PinnedBuffer::into_vec`, whose buffer
    /// gives up its handle `this`. Waits for every fence; then, when `this` was the last
    /// handle (no graph holds the memory) and the memory is a registered `Vec<T>`, unregisters
    /// it and hands that very `Vec` back. Otherwise (a graph holds the memory, it came from
    /// `cuMemHostAlloc`, or unregistering failed) the elements are copied out, and the memory
    /// stays with its other holders (or is released by its drop).
    pub(crate) fn into_vec<T: Pod>(this: Arc<PinnedMemory>, len: usize) -> Result<Vec<T>> {
        const CALL: &str = "PinnedBuffer::into_vec";
        let memory = match Arc::try_unwrap(this) {
            Ok(mut memory) => {
                memory.wait_for_device()?;
                if let Some(vec) = memory.take_vec::<T>(len) {
                    return Ok(vec);
                }
                Arc::new(memory)
            }
            Err(shared) => shared,
        };
        Ok(memory.host_slice::<T>(CALL, 0, len)?.get().to_vec())
    }

    /// Unregisters a `Vec<T>` of `len` elements and rebuilds it; `None` when the memory is no
    /// such `Vec` or unregistering failed. The caller holds the only handle and has waited
    /// for every fence.
    fn take_vec<T: Pod>(&mut self, len: usize) -> Option<Vec<T>> {
        let Origin::Vec { parts, registered } = self.origin else {
            return None;
        };
        if parts.elem != TypeId::of::<T>() || parts.len != len {
            return None;
        }
        if let Err(e) = self.unregister_if(registered) {
            tracing::warn!(error = %e, "unregistering pinned memory failed; copying it out instead");
            return None;
        }
        self.origin = Origin::Released;
        // SAFETY: the parts of a `Vec<T>` (the `Vec` origin's invariant; `T` checked above),
        // rebuilt once: the origin is now `Released`, so neither `Drop` nor a second call
        // touches them. It is no longer registered, and no device work can touch it: every
        // fence has completed and the caller holds the only handle, so no graph can launch
        // work on it.
        Some(unsafe { Vec::from_raw_parts(self.ptr.as_ptr().cast::<T>(), len, parts.capacity) })
    }

    /// `cuMemHostUnregister` of the block, when `registered` (the `Vec` origin's flag).
    fn unregister_if(&self, registered: bool) -> Result<()> {
        if !registered {
            return Ok(());
        }
        let d = self.ctx.bind()?;
        // SAFETY: `ptr` is the base address `cuMemHostRegister` page-locked (the `Vec`
        // origin's invariant, which the callers checked); unregistering changes no byte.
        check("cuMemHostUnregister", unsafe {
            (d.cuMemHostUnregister)(self.ptr.as_ptr().cast())
        })
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

    /// Makes sure `stream`'s fence sequence can mark the [`fence_after_enqueue`] following an
    /// enqueue without failing, and covers its earlier marks (so that the host's wait for
    /// them does not also wait for this enqueue). Call it before the enqueue: it can fail, and
    /// marking must not fail once work is in flight.
    ///
    /// [`fence_after_enqueue`]: PinnedMemory::fence_after_enqueue
    pub(crate) fn prepare_fence(&self, stream: &Stream) -> Result<()> {
        stream.fence_clock().prepare()
    }

    /// Keeps a fence of `stream` after the work just enqueued there that touches this memory
    /// (call it under the stream's gate, after every eager enqueue or graph launch that reads
    /// or writes it). It cannot fail, since the work is already enqueued: when a fence cannot
    /// be marked (on a stream whose fences are recorded at once, recording and then waiting
    /// for the stream failed), the memory is marked lost.
    pub(crate) fn fence_after_enqueue(&self, stream: &Stream) {
        let fence = stream.fence_clock().mark();
        self.keep_in(&mut self.lock_fences(), fence.as_ref());
    }

    fn keep_in(&self, fences: &mut Fences, fence: Option<&Fence>) {
        let Some(fence) = fence else {
            self.lost.store(true, Ordering::Release);
            return;
        };
        match fences.iter_mut().find(|kept| kept.same_clock(fence)) {
            Some(kept) => kept.advance_to(fence),
            None => fences.push(fence.clone()),
        }
    }

    /// Blocks until no enqueued work touches this memory any more. An asynchronous fault of
    /// that work is returned.
    pub(crate) fn wait_for_device(&self) -> Result<()> {
        self.wait_in(&mut self.lock_fences())
    }

    fn wait_in(&self, fences: &mut Fences) -> Result<()> {
        if self.lost.load(Ordering::Acquire) {
            return Err(Error::invalid(
                "PinnedBuffer",
                "work touching this pinned memory could not be fenced or awaited, so the host \
                 may not access it any more",
            ));
        }
        let mut first_error = None;
        // Completed fences are dropped: the next wait makes no call for them.
        fences.retain(|fence| match fence.wait() {
            Ok(()) => false,
            Err(e) => {
                first_error.get_or_insert(e);
                true
            }
        });
        first_error.map_or(Ok(()), Err)
    }

    /// Whether any fence is still pending (without blocking).
    pub(crate) fn is_busy(&self) -> Result<bool> {
        if self.lost.load(Ordering::Acquire) {
            return Ok(true);
        }
        for fence in self.lock_fences().iter() {
            if !fence.is_complete()? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Waits for every fence and counts a slice, under the gate a graph launch holds.
    fn begin_host_access(&self) -> Result<()> {
        let mut fences = self.lock_fences();
        self.wait_in(&mut fences)?;
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
        if let Origin::Released = self.origin {
            return;
        }
        if let Err(e) = self.wait_for_device() {
            // The device may still read or write it: leak rather than free under it.
            tracing::warn!(error = %e, bytes = self.bytes, "waiting for device work before freeing pinned memory failed; leaking it");
            return;
        }
        match self.origin {
            Origin::HostAlloc => {
                let Ok(d) = self.ctx.bind() else {
                    tracing::warn!(
                        bytes = self.bytes,
                        "could not bind the context to free pinned memory; leaking it"
                    );
                    return;
                };
                // SAFETY: allocated by cuMemHostAlloc (the `HostAlloc` origin's invariant);
                // no fence is pending and no holder remains.
                let code = unsafe { (d.cuMemFreeHost)(self.ptr.as_ptr().cast()) };
                if !code.is_success() {
                    tracing::warn!(?code, "cuMemFreeHost failed while dropping pinned memory");
                }
            }
            Origin::Vec { parts, registered } => {
                if let Err(e) = self.unregister_if(registered) {
                    // The driver may still treat the pages as pinned: never hand them back
                    // to the allocator.
                    tracing::warn!(error = %e, bytes = self.bytes, "unregistering pinned memory failed; leaking it");
                    return;
                }
                // SAFETY: the raw parts of the user's `Vec` (the `Vec` origin's invariant),
                // rebuilt once (this is the last use of the memory); no fence is pending, no
                // holder remains, and the block is no longer registered.
                unsafe { (parts.free)(self.ptr, parts.len, parts.capacity) };
            }
            Origin::Released => {}
        }
    }
}

impl std::fmt::Debug for PinnedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedMemory")
            .field("ptr", &self.ptr)
            .field("bytes", &self.bytes)
            .field("origin", &self.origin)
            .finish()
    }
}
