//! Device memory: from `cuMemAlloc`, the stream-ordered allocator, or `cuMemAllocManaged`, and
//! the rule that decides how it is freed.
//!
//! The soundness rule for device memory, enforced here and nowhere else:
//! - memory is freed only when the last holder drops (buffers, captured graphs and executable
//!   graphs all hold an `Arc`), and the free first waits for all work that may touch it (the
//!   context is synchronized);
//! - stream-ordered memory is freed without a synchronize (`cuMemFreeAsync`) only when nothing
//!   else holds it and every enqueue that touched it went to the freeing stream outside any
//!   capture (`free_rule::plan_free`, shared with the CPU backend); each allocation folds the
//!   streams of its uses into one atomic word for this (`StreamUse`). That is how
//!   `Stream::free_async` frees, and how the last holder's drop frees on the stream the
//!   memory was allocated on while that stream lives ([`StreamLink::with_live`]): a temporary
//!   used on one stream never stalls the others;
//! - a raw device address handed out (`device_ptr`, a loan to another library) may be used
//!   on any stream without our knowing: the memory then counts as used on several streams;
//! - memory another library allocated (`AllocKind::Foreign`) is not ours to free: the
//!   allocation holds the library's owning value, and the last holder drops that value after
//!   a context synchronize, by the same rule as `cuMemAlloc` memory; it is given back to the
//!   library only by the last holder, after a synchronize (`take_owner`);
//! - memory from `cuMemAlloc` is freed after a context synchronize: `cuMemFree` is not
//!   stream-ordered (it may run only once no work can touch the memory, and no stream can be
//!   told to wait before it), so freeing it without the synchronize would mean parking it
//!   until an event of its last stream completes and freeing it from another thread, where
//!   `cuMemFree` itself may still wait for the device. Temporaries that must not stall other
//!   streams come from the stream-ordered allocator (`Stream::alloc_async`) instead;
//! - when the wait before a free fails, work may still use the memory: it is leaked, never
//!   freed;
//! - the host sees managed memory only through [`HostSlice`]s taken after a context
//!   synchronize and counted in the allocation ([`BorrowCount`]): a graph launch, which borrows
//!   nothing, refuses to run while one is alive (see `graph.rs`).

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytemuck::Pod;

use crate::driver::check;
use crate::error::{Error, Result};
use crate::free_rule::{AllocKind, FreeMode, StreamUse, plan_free};
use crate::sys;

use super::stream::StreamLink;
use super::{Context, Stream};

/// How many host slices of an allocation are alive. Raised only under the allocation's gate
/// (which a graph launch holds while it checks the count and enqueues); lowered by the
/// slice's drop. A forgotten slice keeps it raised, which only makes later launches fail.
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

/// A host view of memory the device works on, counted in its allocation while it lives
/// (see [`BorrowCount`]): what `as_slice` of pinned and managed buffers returns on CUDA.
pub(crate) struct HostSlice<'a, T> {
    slice: &'a [T],
    borrow: &'a BorrowCount,
}

/// The mutable form of [`HostSlice`].
pub(crate) struct HostSliceMut<'a, T> {
    slice: &'a mut [T],
    borrow: &'a BorrowCount,
}

impl<'a, T> HostSlice<'a, T> {
    /// Wraps a slice whose borrow was already counted in `borrow`.
    pub(crate) fn new(slice: &'a [T], borrow: &'a BorrowCount) -> Self {
        HostSlice { slice, borrow }
    }

    /// The elements.
    pub(crate) fn get(&self) -> &[T] {
        self.slice
    }
}

impl<'a, T> HostSliceMut<'a, T> {
    /// Wraps a slice whose borrow was already counted in `borrow`.
    pub(crate) fn new(slice: &'a mut [T], borrow: &'a BorrowCount) -> Self {
        HostSliceMut { slice, borrow }
    }

    /// The elements.
    pub(crate) fn get(&self) -> &[T] {
        self.slice
    }

    /// The elements, mutably.
    pub(crate) fn get_mut(&mut self) -> &mut [T] {
        self.slice
    }
}

impl<T> Drop for HostSlice<'_, T> {
    fn drop(&mut self) {
        self.borrow.release();
    }
}

impl<T> Drop for HostSliceMut<'_, T> {
    fn drop(&mut self) {
        self.borrow.release();
    }
}

/// Checks that `len` elements of `T` starting `offset` bytes into an allocation of `bytes`
/// bytes at `addr` lie within it and are aligned for `T`.
pub(crate) fn check_host_view<T>(
    call: &'static str,
    addr: usize,
    bytes: usize,
    offset: usize,
    len: usize,
) -> Result<()> {
    let end = len
        .checked_mul(std::mem::size_of::<T>())
        .and_then(|n| n.checked_add(offset));
    if end.is_none_or(|end| end > bytes) {
        return Err(Error::invalid(
            call,
            format!("{len} elements at byte {offset} do not fit in {bytes} bytes"),
        ));
    }
    if !(addr.wrapping_add(offset)).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::invalid(
            call,
            format!(
                "the memory is not aligned for `{}`",
                std::any::type_name::<T>()
            ),
        ));
    }
    Ok(())
}

/// A device allocation.
///
/// Invariant: `ptr` is the base of a live allocation of at least `max(bytes, 1)` bytes made in
/// `ctx` as `kind` says, freed at most once (by `free_now`, `free_async`,
/// `free_on_home_stream` or nothing, when it is leaked), and only when no enqueued work can
/// touch it any more, or in the stream order after all such work (the module's rule). `home`,
/// when set, is the stream a stream-ordered allocation was made on. `Foreign` memory is never
/// freed here: it lies within the allocation `owner` holds, which stays alive until this
/// value drops or gives it back (`take_owner`), both after a context synchronize.
/// Managed memory was zeroed at allocation, so the host may read it as any `Pod` type.
pub(crate) struct DeviceMemory {
    ctx: Arc<Context>,
    ptr: sys::CUdeviceptr,
    bytes: usize,
    kind: AllocKind,
    uses: StreamUse,
    /// The stream a stream-ordered allocation was made on, where its drop frees it when every
    /// use was on that stream.
    home: Option<StreamLink>,
    /// Set once the memory was freed or given up (leaked), so Drop frees nothing.
    freed: AtomicBool,
    /// Orders host access to managed memory with graph launches (see `BorrowCount`).
    gate: Mutex<()>,
    /// Host slices of managed memory alive now.
    borrows: BorrowCount,
    /// The other library's owning value of `Foreign` memory (`None` for ours, and once given
    /// back).
    owner: Mutex<Option<Box<dyn Any + Send + Sync>>>,
    /// The contexts of other devices whose streams used this memory (peer copies, kernels
    /// given a peer's buffer): freeing it and host views wait for them too, since
    /// synchronizing this context does not.
    peers: Mutex<Vec<Arc<Context>>>,
    /// Only one graph's nodes use it (`alloc_zeroing`): freed inside a [`Quiesced`] scope of
    /// its context, it needs no synchronize of its own.
    ///
    /// [`Quiesced`]: super::quiesced::Quiesced
    private: bool,
    /// A slot of the context's word slab (`alloc_zeroing` of a few bytes): handed back to
    /// it instead of freed.
    slot: bool,
}

// SAFETY: a device address is a plain integer usable from any thread; the driver frees it
// once (the type's invariant).
unsafe impl Send for DeviceMemory {}
// SAFETY: as above; the interior mutability is atomics and a mutex.
unsafe impl Sync for DeviceMemory {}

impl DeviceMemory {
    fn wrap(
        ctx: &Arc<Context>,
        ptr: sys::CUdeviceptr,
        bytes: usize,
        kind: AllocKind,
        uses: u64,
    ) -> Self {
        DeviceMemory {
            ctx: ctx.clone(),
            ptr,
            bytes,
            kind,
            uses: StreamUse::new(uses),
            home: None,
            freed: AtomicBool::new(false),
            gate: Mutex::new(()),
            borrows: BorrowCount::default(),
            owner: Mutex::new(None),
            peers: Mutex::new(Vec::new()),
            private: false,
            slot: false,
        }
    }

    /// Device memory that another library allocated and owns: `owner` is its owning value
    /// (e.g. a cudarc `CudaSlice`), held until this value drops (then dropped after a context
    /// synchronize) or gives it back (`DeviceMemory::take_owner`, with the `cudarc` feature).
    ///
    /// # Safety
    /// `ptr` must be the address of at least `max(bytes, 1)` bytes of device memory of
    /// `ctx`'s context that stay allocated for as long as `owner` is alive, that nothing else
    /// uses while this value holds `owner` (no other handle to the memory exists outside
    /// `owner`), and whose contents are initialised.
    pub(crate) unsafe fn foreign(
        ctx: &Arc<Context>,
        ptr: sys::CUdeviceptr,
        bytes: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> DeviceMemory {
        let memory = DeviceMemory::wrap(ctx, ptr, bytes, AllocKind::Foreign, StreamUse::UNUSED);
        *memory.owner.lock().unwrap_or_else(PoisonError::into_inner) = Some(owner);
        memory
    }

    /// Gives the owning value of `Foreign` memory back, when `this` is the last holder (no
    /// graph keeps it), after waiting for all work of the context (so no enqueued work can
    /// touch the memory any more). Otherwise, or for memory of ours, returns `this`.
    #[cfg(feature = "cudarc")]
    pub(crate) fn take_owner(
        this: Arc<Self>,
    ) -> std::result::Result<Result<Box<dyn Any + Send + Sync>>, Arc<Self>> {
        if this.kind != AllocKind::Foreign {
            return Err(this);
        }
        let memory = Arc::try_unwrap(this)?;
        if let Err(e) = memory.ctx.synchronize() {
            // Work may still use the memory: keep holding it; Drop then leaks it (its own
            // synchronize fails too, or succeeds and the owner is dropped then).
            return Ok(Err(e));
        }
        memory.freed.store(true, Ordering::Release);
        let owner = memory
            .owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(owner.ok_or_else(|| {
            Error::invalid(
                "DeviceMemory::take_owner",
                "the memory was given back already",
            )
        }))
    }

    /// `bytes` of device memory (`cuMemAlloc`; at least one byte, so the address is unique).
    pub(crate) fn alloc(ctx: &Arc<Context>, bytes: usize) -> Result<DeviceMemory> {
        let d = ctx.bind()?;
        let mut ptr = 0;
        // SAFETY: a valid out-pointer; freed by the rules above.
        check("cuMemAlloc", unsafe {
            (d.cuMemAlloc)(&mut ptr, bytes.max(1))
        })?;
        Ok(DeviceMemory::wrap(
            ctx,
            ptr,
            bytes,
            AllocKind::Plain,
            StreamUse::UNUSED,
        ))
    }

    /// `bytes` of zeroed device memory: `cuMemsetD8` on the legacy stream, then that stream
    /// synchronized (it runs before any work can reach the memory; no other stream is waited
    /// for).
    pub(crate) fn alloc_zeroed(ctx: &Arc<Context>, bytes: usize) -> Result<DeviceMemory> {
        let memory = DeviceMemory::alloc_with_memset(ctx, bytes)?;
        settle_legacy_zeroing(ctx)?;
        Ok(memory)
    }

    /// `bytes` of device memory with `cuMemsetD8` zeroing it on the legacy stream, which
    /// non-blocking streams do not wait for: no work may reach the memory before
    /// [`settle_legacy_zeroing`] returned. For memory only a graph's nodes use, whose graph
    /// settles before its first instantiation or update (`Graph::zeroed_on_legacy`): the
    /// memset then runs while the graph is built, instead of the host waiting for it here.
    ///
    /// The memory is the graph's alone: nothing but its nodes may use it, so that a drop inside
    /// a [`Quiesced`](super::quiesced::Quiesced) scope frees it with no synchronize.
    ///
    /// A few bytes (a condition's words, a loop's counter) are a slot of the context's word
    /// slab, handed back on drop: no `cuMemAlloc` and `cuMemFree` per graph.
    pub(crate) fn alloc_zeroing(ctx: &Arc<Context>, bytes: usize) -> Result<DeviceMemory> {
        if bytes > super::slab::WORD_SLOT_BYTES {
            let mut memory = DeviceMemory::alloc_with_memset(ctx, bytes)?;
            memory.private = true;
            return Ok(memory);
        }
        let d = ctx.bind()?;
        let ptr = ctx.word_slab().take(d)?;
        let mut memory = DeviceMemory::wrap(ctx, ptr, bytes, AllocKind::Plain, StreamUse::UNUSED);
        memory.private = true;
        memory.slot = true;
        // SAFETY: `bytes` (at most a slot's) of a slot lent to this memory alone, which no
        // work uses any more (handed back after a wait).
        check("cuMemsetD8", unsafe {
            (d.cuMemsetD8)(ptr, 0, bytes.max(1))
        })?;
        Ok(memory)
    }

    /// `bytes` of device memory and a `cuMemsetD8` zeroing it on the legacy stream, not
    /// waited for.
    fn alloc_with_memset(ctx: &Arc<Context>, bytes: usize) -> Result<DeviceMemory> {
        let memory = DeviceMemory::alloc(ctx, bytes)?;
        let d = ctx.bind()?;
        // SAFETY: a fresh allocation of at least `bytes` bytes that no work has been given yet.
        check("cuMemsetD8", unsafe {
            (d.cuMemsetD8)(memory.ptr, 0, bytes.max(1))
        })?;
        Ok(memory)
    }

    /// `bytes` of zeroed managed memory, attached globally (any stream, and the host, may use
    /// it).
    pub(crate) fn alloc_managed(ctx: &Arc<Context>, bytes: usize) -> Result<DeviceMemory> {
        let d = ctx.bind()?;
        let mut ptr = 0;
        // SAFETY: a valid out-pointer and a documented flag; freed by the rules above.
        check("cuMemAllocManaged", unsafe {
            (d.cuMemAllocManaged)(&mut ptr, bytes.max(1), sys::CU_MEM_ATTACH_GLOBAL)
        })?;
        let memory = DeviceMemory::wrap(ctx, ptr, bytes, AllocKind::Managed, StreamUse::UNUSED);
        // SAFETY: a fresh managed allocation of at least `bytes` bytes that no work has been
        // given yet.
        check("cuMemsetD8", unsafe {
            (d.cuMemsetD8)(ptr, 0, bytes.max(1))
        })?;
        // The memset may run on the legacy stream, which streams created non-blocking do not
        // wait for: finish it before any work or host access can see the memory.
        ctx.synchronize()?;
        Ok(memory)
    }

    /// `bytes` of device memory allocated in `stream`'s order, from `pool` or (with `None`)
    /// the device's current pool. The allocation counts as used on `stream`. Refused while the
    /// stream captures: a captured allocation belongs to the graph.
    pub(crate) fn alloc_async(
        stream: &Stream,
        bytes: usize,
        pool: Option<&super::MemoryPool>,
    ) -> Result<DeviceMemory> {
        let _gate = stream.gate();
        if stream.capture_now()?.is_some() {
            return Err(Error::invalid(
                "Stream::alloc_async",
                "the stream is capturing; a captured allocation belongs to the graph and \
                 cannot become a buffer (allocate before the capture)",
            ));
        }
        let d = stream.bind()?;
        let mut ptr = 0;
        let (call, code) = match pool {
            // SAFETY: a valid out-pointer and a live stream; `pool` is a live pool of the
            // stream's device (MemoryPool's invariant; the public layer checked the context).
            Some(pool) => ("cuMemAllocFromPoolAsync", unsafe {
                (d.cuMemAllocFromPoolAsync)(&mut ptr, bytes.max(1), pool.raw(), stream.raw())
            }),
            // SAFETY: a valid out-pointer and a live stream.
            None => ("cuMemAllocAsync", unsafe {
                (d.cuMemAllocAsync)(&mut ptr, bytes.max(1), stream.raw())
            }),
        };
        check(call, code)?;
        let mut memory = DeviceMemory::wrap(
            stream.context(),
            ptr,
            bytes,
            AllocKind::StreamOrdered,
            StreamUse::tag(stream.id()),
        );
        memory.home = Some(stream.link());
        Ok(memory)
    }

    /// The context.
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The device address of the first byte.
    pub(crate) fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// The size in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// How it was allocated.
    pub(crate) fn kind(&self) -> AllocKind {
        self.kind
    }

    /// Records that work touching this memory is being enqueued on `stream` (call under the
    /// stream's gate, before the enqueue: a use recorded for work that then fails to enqueue
    /// only makes the eventual free more conservative). A stream of another device's context
    /// (a kernel given a peer's buffer, a peer copy) counts as a peer use, so the free and
    /// host views wait for that context too.
    #[inline]
    pub(crate) fn note_use(&self, stream: &Stream) {
        if stream.context().raw() != self.ctx.raw() {
            return self.note_peer_use(stream);
        }
        self.uses.record(StreamUse::tag_for(
            stream.id(),
            stream.tracked_capture().is_some(),
        ));
    }

    /// Records that the device address was handed out for untracked use (by the user, or a
    /// library the memory is lent to): work on any stream may touch it from now on.
    pub(crate) fn note_escape(&self) {
        self.uses.record(StreamUse::SHARED);
    }

    /// Records that work touching this memory is being enqueued on `stream`, a stream of
    /// another device's context (see [`note_use`](Self::note_use)). The memory then counts as
    /// used on several streams, and its free waits for that context as well as its own.
    #[cold]
    fn note_peer_use(&self, stream: &Stream) {
        self.uses.record(StreamUse::SHARED);
        let ctx = stream.context();
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        if !peers.iter().any(|p| p.raw() == ctx.raw()) {
            peers.push(ctx.clone());
        }
    }

    /// Frees `this` on `stream` by the rule of [`plan_free`] if it is the last holder; else
    /// drops this reference and reports [`FreeMode::Deferred`]. `keep_in_capture` hands the
    /// memory to the graph being captured when the stream captures.
    pub(crate) fn free_async(
        this: Arc<Self>,
        stream: &Stream,
        keep_in_capture: impl FnOnce(u64, Arc<DeviceMemory>),
    ) -> Result<FreeMode> {
        let _gate = stream.gate();
        let capture = stream.capture_now()?;
        let Ok(memory) = Arc::try_unwrap(this) else {
            return Ok(FreeMode::Deferred);
        };
        let mode = plan_free(
            memory.kind,
            memory.uses.get(),
            StreamUse::tag(stream.id()),
            capture.is_some(),
        );
        match (mode, capture) {
            (FreeMode::Deferred, Some(id)) => keep_in_capture(id, Arc::new(memory)),
            (FreeMode::StreamOrdered, _) => {
                let d = stream.bind()?;
                // Whatever the driver says, the memory is not freed again by Drop: after a
                // failed free it is leaked, which is safe.
                memory.freed.store(true, Ordering::Release);
                // SAFETY: a stream-ordered allocation of this context that no one else holds;
                // all work touching it was enqueued on `stream` (plan_free), so the free
                // follows it in stream order.
                check("cuMemFreeAsync", unsafe {
                    (d.cuMemFreeAsync)(memory.ptr, stream.raw())
                })?;
            }
            _ => memory.free_now()?,
        }
        Ok(mode)
    }

    /// Synchronizes the context, then frees. When the synchronize fails, work may still use
    /// the memory, so it is leaked instead (an error here usually means the context is lost).
    fn free_now(&self) -> Result<()> {
        if self.freed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Work enqueued on any stream may still read or write this memory: wait for it all,
        // on the other devices whose streams used it too. Memory only graphs' nodes used
        // (no stream work was ever enqueued on it: a condition handle's `word()` lends it to
        // streams too), freed where a graph's owner just synchronized its context, has no
        // other work to wait for (`quiesced.rs`): a graph launched since is an executable
        // graph that holds it, whose drop waited.
        let peers = std::mem::take(&mut *self.peers.lock().unwrap_or_else(PoisonError::into_inner));
        let waited = if self.private
            && peers.is_empty()
            && self.uses.get() == StreamUse::UNUSED
            && super::quiesced::covers(&self.ctx)
        {
            Ok(())
        } else {
            self.ctx
                .synchronize()
                .and_then(|()| peers.iter().try_for_each(|peer| peer.synchronize()))
        };
        if let Err(e) = waited {
            // Another library's memory is leaked by forgetting its owner, which would free it.
            let owner = self
                .owner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            std::mem::forget(owner);
            return Err(e);
        }
        if self.slot {
            // Waited for above: the next graph's words may be these.
            self.ctx.word_slab().give_back(self.ptr);
            return Ok(());
        }
        if self.kind == AllocKind::Foreign {
            // Not ours: its owner frees it (in its own stream order) when dropped.
            drop(
                self.owner
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take(),
            );
            return Ok(());
        }
        let d = self.ctx.bind()?;
        // SAFETY: allocated by cuMemAlloc / cuMemAllocAsync / cuMemAllocManaged (cuMemFree
        // takes all three); nothing can use it any more (see above), and `freed` stops a
        // second free.
        check("cuMemFree", unsafe { (d.cuMemFree)(self.ptr) })
    }

    /// The gate a graph launch holds while it checks for host slices and enqueues.
    pub(crate) fn gate(&self) -> MutexGuard<'_, ()> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a host slice of the memory is alive (meaningful under the gate).
    pub(crate) fn is_borrowed(&self) -> bool {
        self.borrows.is_borrowed()
    }

    /// Starts a host access to managed memory: synchronizes the context and counts a slice,
    /// under the gate a graph launch holds.
    fn begin_host_access(&self, call: &'static str) -> Result<()> {
        if self.kind != AllocKind::Managed {
            return Err(Error::invalid(
                call,
                "only managed memory is host-accessible",
            ));
        }
        let _gate = self.gate();
        self.ctx.synchronize()?;
        // Streams of other devices that used it (peer copies, peer kernels) may still run.
        let peers = self
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        peers.iter().try_for_each(|peer| peer.synchronize())?;
        self.borrows.acquire();
        Ok(())
    }

    /// `len` elements of `T` from byte `offset` of managed memory, for the host to read: taken
    /// after a context synchronize, counted until dropped.
    pub(crate) fn host_slice<T: Pod>(
        &self,
        call: &'static str,
        offset: usize,
        len: usize,
    ) -> Result<HostSlice<'_, T>> {
        check_host_view::<T>(call, self.ptr as usize, self.bytes, offset, len)?;
        self.begin_host_access(call)?;
        let ptr = std::ptr::with_exposed_provenance::<T>(self.ptr as usize + offset);
        // SAFETY: managed memory (checked) is host-accessible through its unified address,
        // which the driver hands out as an integer (hence the exposed provenance); the range
        // lies within the live allocation and is aligned for `T` (checked above); its bytes
        // are initialised (zeroed at allocation, later written only with `Pod` data). No
        // work runs in the context now (synchronized), work that writes the memory cannot be
        // enqueued through safe code while the caller's shared borrow lives, and graph
        // launches refuse to run while the borrow counted above is alive.
        let slice = unsafe { std::slice::from_raw_parts(ptr, len) };
        Ok(HostSlice::new(slice, &self.borrows))
    }

    /// The mutable form of [`DeviceMemory::host_slice`]; the caller holds the buffer
    /// exclusively.
    pub(crate) fn host_slice_mut<T: Pod>(
        &self,
        call: &'static str,
        offset: usize,
        len: usize,
    ) -> Result<HostSliceMut<'_, T>> {
        check_host_view::<T>(call, self.ptr as usize, self.bytes, offset, len)?;
        self.begin_host_access(call)?;
        let ptr = std::ptr::with_exposed_provenance_mut::<T>(self.ptr as usize + offset);
        // SAFETY: as in `host_slice`; the caller's exclusive borrow of the buffer keeps any
        // other host slice and any enqueue on the memory away while this one lives.
        let slice = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        Ok(HostSliceMut::new(slice, &self.borrows))
    }

    /// The last holder's free when every use was on the stream the memory was allocated on
    /// (outside captures) and that stream is live: `cuMemFreeAsync` there, without waiting.
    /// `None` when the rule does not allow it (the caller then frees with `free_now`).
    fn free_on_home_stream(&self) -> Option<Result<()>> {
        let home = self.home.as_ref()?;
        let tag = StreamUse::tag(home.id());
        if plan_free(self.kind, self.uses.get(), tag, false) != FreeMode::StreamOrdered {
            return None;
        }
        let d = match self.ctx.bind() {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        home.with_live(|raw| {
            // A capture begun by other code (possible on a borrowed handle) would turn the
            // free into a node of its graph: leave such a stream alone.
            let mut capturing = sys::CUstreamCaptureStatus::NONE;
            let mut id = 0;
            // SAFETY: `raw` is live while this closure runs (`with_live`); valid out-pointers,
            // and null for the outputs not wanted, which the API allows.
            let code = unsafe {
                (d.cuStreamGetCaptureInfo)(
                    raw,
                    &mut capturing,
                    &mut id,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            if !code.is_success() || capturing != sys::CUstreamCaptureStatus::NONE {
                return None;
            }
            // Whatever the driver says, the memory is not freed again: after a failed free it
            // is leaked, which is safe.
            if self.freed.swap(true, Ordering::AcqRel) {
                return Some(Ok(()));
            }
            // SAFETY: a stream-ordered allocation of this context (`kind`) that no one else
            // holds (this is its drop) and whose address no one was handed (`note_escape`
            // would have made it shared); every enqueue that touched it went to `raw` outside
            // any capture (`plan_free`), so the free follows all of them in that stream's
            // order. `raw` is live and not capturing while the closure runs.
            Some(check("cuMemFreeAsync", unsafe {
                (d.cuMemFreeAsync)(self.ptr, raw)
            }))
        })
        .flatten()
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        match self.free_on_home_stream() {
            Some(Ok(())) => return,
            Some(Err(e)) if self.freed.load(Ordering::Acquire) => {
                tracing::warn!(error = %e, bytes = self.bytes, "freeing device memory in stream order failed (leaked)");
                return;
            }
            // Not freed: the synchronizing free below.
            Some(Err(_)) | None => {}
        }
        if let Err(e) = self.free_now() {
            tracing::warn!(error = %e, bytes = self.bytes, "freeing device memory failed (leaked, since work may still use it)");
        }
    }
}

impl std::fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMemory")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("bytes", &self.bytes)
            .field("kind", &self.kind)
            .finish()
    }
}

/// Waits for what [`DeviceMemory::alloc_zeroing`] enqueued on `ctx`'s legacy stream (and, as
/// the legacy stream does, for the work of blocking streams enqueued before it).
pub(crate) fn settle_legacy_zeroing(ctx: &Context) -> Result<()> {
    let d = ctx.bind()?;
    // SAFETY: the legacy stream of the bound context (a null handle).
    check("cuStreamSynchronize", unsafe {
        (d.cuStreamSynchronize)(std::ptr::null_mut())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_views_must_fit_and_be_aligned() {
        assert!(check_host_view::<u32>("t", 0x1000, 16, 0, 4).is_ok());
        assert!(check_host_view::<u32>("t", 0x1000, 16, 4, 4).is_err());
        assert!(check_host_view::<u32>("t", 0x1000, 16, 2, 1).is_err());
        assert!(check_host_view::<u64>("t", 0x1000, 16, 0, usize::MAX).is_err());
    }
}
