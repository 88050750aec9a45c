//! CPU-backend memory: the heap allocations that stand in for device, pinned and managed
//! memory, in safe Rust.
//!
//! Each allocation is registered with the context's race detector (a [`BufferId`] and a name
//! for reports) and keeps its bytes behind a read-write lock. Operations run on stream worker
//! threads, so two operations that no event orders may really run at the same time; on a GPU
//! that is a race with unspecified results, in Rust it would be undefined behaviour. So every
//! operation that touches allocations holds, while it runs, a read lock on each allocation it
//! reads and a write lock on each it writes, taken in [`BufferId`] order (no two operations
//! wait on each other). The locks make unordered operations memory-safe; they do not order
//! them, and the race detector (checked mode) still reports every such pair, since finding the
//! missing event is the point.
//!
//! The host reaches the bytes through [`HostSlice`]s, taken once no queued work touches the
//! memory (every eager operation and graph replay that touches it holds a [`Pending`] token
//! from its enqueue until it has run), which hold the lock while they live. An operation that
//! finds its allocation held by a host slice fails instead of waiting for ever: a slice is
//! only taken after the work that touches the memory has completed, and work that writes it
//! cannot be enqueued while the slice borrows its buffer, so only a forgotten slice can be in
//! the way. Graph launches, which borrow nothing, refuse to run while a slice of memory they
//! touch is alive (see [`Memory::gate`]).
//!
//! Operations and graph nodes hold the allocations they touch (`Arc<Memory>`), so memory is
//! freed only when nothing that can still run holds it.
//!
//! The bytes are the crate's own 16-byte-aligned chunks, or a `Vec` the user handed over
//! ([`Memory::from_vec`], behind `PinnedBuffer::register`): the same heap block, viewed as
//! bytes, which [`Memory::take_vec`] hands back untouched when no graph holds the memory.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    TryLockError,
};

use bytemuck::Pod;

use super::shared::{ContextShared, on_worker_thread};
use crate::free_rule::{AllocKind, FreeMode, StreamUse, plan_free};
use crate::vocab::access::{Access, BufferId, Span};
use crate::vocab::fault::CpuFault;

/// The storage unit: 16-byte aligned, so any element type up to that alignment is aligned at
/// every multiple of its size.
type Chunk = u128;

/// The alignment the first byte of every allocation the crate makes has.
pub(crate) const ALIGN: usize = std::mem::align_of::<Chunk>();

/// The bytes of an allocation.
pub(crate) enum Storage {
    /// Allocated by the crate: `ALIGN`-aligned chunks.
    Chunks(Vec<Chunk>),
    /// A `Vec` handed over by the user, kept as it is so it can be handed back.
    Vec(Box<dyn UserVec>),
    /// The user's `Vec` was handed back ([`Memory::take_vec`]): no bytes are left.
    Taken,
}

/// A user's `Vec<T>`, seen as bytes.
pub(crate) trait UserVec: Send + Sync {
    /// The elements' bytes.
    fn bytes(&self) -> &[u8];
    /// The elements' bytes, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// The `Vec<T>` itself, to check its type.
    fn as_any(&self) -> &dyn Any;
    /// The `Vec<T>` itself, to downcast.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Pod + Send + Sync> UserVec for Vec<T> {
    fn bytes(&self) -> &[u8] {
        // Zero-sized elements have no bytes (and bytemuck refuses to cast them).
        if std::mem::size_of::<T>() == 0 {
            return &[];
        }
        bytemuck::cast_slice(self)
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        if std::mem::size_of::<T>() == 0 {
            return &mut [];
        }
        bytemuck::cast_slice_mut(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Storage::Chunks(chunks) => write!(f, "Chunks({} bytes)", chunks.len() * ALIGN),
            Storage::Vec(vec) => write!(f, "Vec({} bytes)", vec.bytes().len()),
            Storage::Taken => f.write_str("Taken"),
        }
    }
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Chunks(chunks) => bytemuck::cast_slice(chunks),
            Storage::Vec(vec) => vec.bytes(),
            Storage::Taken => &[],
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Storage::Chunks(chunks) => bytemuck::cast_slice_mut(chunks),
            Storage::Vec(vec) => vec.bytes_mut(),
            Storage::Taken => &mut [],
        }
    }
}

/// `len` zero-sized elements: no memory, so a leaked empty `Vec` provides them for free.
fn zero_sized<'a, T: Pod>(len: usize) -> &'a mut [T] {
    debug_assert_eq!(std::mem::size_of::<T>(), 0);
    Vec::leak(vec![T::zeroed(); len])
}

/// What an allocation stands in for, which decides how the host reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemoryKind {
    /// Device memory: no host access.
    Device,
    /// Pinned host memory: host access once the work that touches it has run.
    Pinned,
    /// Managed memory: host access once the work that touches it has run.
    Managed,
}

impl MemoryKind {
    fn noun(self) -> &'static str {
        match self {
            MemoryKind::Device => "device buffer",
            MemoryKind::Pinned => "pinned buffer",
            MemoryKind::Managed => "managed buffer",
        }
    }
}

/// One allocation.
#[derive(Debug)]
pub(crate) struct Memory {
    ctx: Arc<ContextShared>,
    id: BufferId,
    kind: MemoryKind,
    bytes: usize,
    /// The alignment of the first byte: [`ALIGN`], or the element alignment of a user's `Vec`.
    align: usize,
    data: RwLock<Storage>,
    name: Mutex<Arc<str>>,
    /// Whether the owner named it (`named`), which a pipeline's param name does not replace.
    user_named: AtomicBool,
    /// Queued work that touches the memory and has not run yet (see [`Pending`]).
    pending: Mutex<usize>,
    /// Signalled when `pending` drops to zero.
    idle: Condvar,
    /// Held by a graph launch while it checks for host slices and enqueues, and by a host
    /// slice while it waits and counts itself.
    gate: Mutex<()>,
    /// Host slices alive now; raised under `gate`.
    host_borrows: AtomicUsize,
    /// How it was allocated, and the streams of its uses: the free rule's inputs.
    alloc: AllocKind,
    uses: StreamUse,
    /// Graph nodes (captured, or of executable graphs) holding it (see [`Held`]).
    graph_holds: AtomicUsize,
}

fn poisoned<T>(result: Result<T, PoisonError<T>>) -> T {
    // A panicking operation leaves plain bytes behind: poisoning carries no meaning here.
    result.unwrap_or_else(PoisonError::into_inner)
}

impl Memory {
    /// `bytes` zeroed bytes, named `<kind> #<n>` in race reports until renamed.
    pub(crate) fn new(
        ctx: &Arc<ContextShared>,
        bytes: usize,
        kind: MemoryKind,
    ) -> Result<Arc<Memory>, String> {
        Memory::with_alloc(ctx, bytes, kind, AllocKind::Plain, StreamUse::UNUSED)
    }

    /// [`Memory::new`], allocated as `alloc` with its first use `uses` (a stream-ordered
    /// allocation counts as used on its allocating stream).
    pub(crate) fn with_alloc(
        ctx: &Arc<ContextShared>,
        bytes: usize,
        kind: MemoryKind,
        alloc: AllocKind,
        uses: u64,
    ) -> Result<Arc<Memory>, String> {
        let chunks = bytes.div_ceil(std::mem::size_of::<Chunk>());
        let mut data = Vec::new();
        data.try_reserve_exact(chunks)
            .map_err(|_| format!("out of host memory: {bytes} bytes could not be allocated"))?;
        data.resize(chunks, 0);
        Ok(Memory::with_storage(
            ctx,
            (Storage::Chunks(data), bytes, ALIGN),
            kind,
            alloc,
            uses,
        ))
    }

    /// `data` itself (no copy) as memory of `kind`: what `PinnedBuffer::register` makes.
    /// [`Memory::take_vec`] hands it back.
    pub(crate) fn from_vec<T: Pod + Send + Sync>(
        ctx: &Arc<ContextShared>,
        data: Vec<T>,
        kind: MemoryKind,
    ) -> Arc<Memory> {
        let bytes = std::mem::size_of_val(data.as_slice());
        let storage = (
            Storage::Vec(Box::new(data)),
            bytes,
            std::mem::align_of::<T>(),
        );
        Memory::with_storage(ctx, storage, kind, AllocKind::Plain, StreamUse::UNUSED)
    }

    fn with_storage(
        ctx: &Arc<ContextShared>,
        (data, bytes, align): (Storage, usize, usize),
        kind: MemoryKind,
        alloc: AllocKind,
        uses: u64,
    ) -> Arc<Memory> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let serial = NEXT.fetch_add(1, Ordering::Relaxed);
        let name: Arc<str> = Arc::from(format!("{} #{serial}", kind.noun()));
        let id = ctx.register_buffer(name.to_string());
        Arc::new(Memory {
            ctx: ctx.clone(),
            id,
            kind,
            bytes,
            align,
            data: RwLock::new(data),
            name: Mutex::new(name),
            user_named: AtomicBool::new(false),
            pending: Mutex::new(0),
            idle: Condvar::new(),
            gate: Mutex::new(()),
            host_borrows: AtomicUsize::new(0),
            alloc,
            uses: StreamUse::new(uses),
            graph_holds: AtomicUsize::new(0),
        })
    }

    /// The id the race detector knows it by.
    pub(crate) fn id(&self) -> BufferId {
        self.id
    }

    /// What it stands in for.
    pub(crate) fn kind(&self) -> MemoryKind {
        self.kind
    }

    /// Its length in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The name used in race reports and operation labels.
    pub(crate) fn name(&self) -> Arc<str> {
        poisoned(self.name.lock()).clone()
    }

    /// Renames the allocation (labels of later operations, and race reports), for good: a
    /// pipeline no longer names it after its params.
    pub(crate) fn set_name(&self, name: &str) {
        self.user_named.store(true, Ordering::Relaxed);
        self.rename(name);
    }

    /// Names the allocation after the pipeline param it is passed as, unless its owner named
    /// it ([`set_name`](Self::set_name)).
    pub(crate) fn name_as_param(&self, name: &str) {
        if !self.user_named.load(Ordering::Relaxed) && *self.name() != *name {
            self.rename(name);
        }
    }

    fn rename(&self, name: &str) {
        *poisoned(self.name.lock()) = Arc::from(name);
        self.ctx.name_buffer(self.id, name.to_owned());
    }

    /// Writes `data` at byte `offset` from the host, at creation (nothing else sees the
    /// memory yet).
    pub(crate) fn fill_from(&self, offset: usize, data: &[u8]) {
        let mut storage = poisoned(self.data.write());
        storage.bytes_mut()[offset..offset + data.len()].copy_from_slice(data);
    }

    /// Sets every byte to `byte` from the host, at creation (nothing else sees the memory
    /// yet).
    pub(crate) fn fill_bytes(&self, byte: u8) {
        poisoned(self.data.write()).bytes_mut().fill(byte);
    }

    /// The lock an operation takes: it waits for other operations, but fails when a host
    /// slice holds the memory (only a forgotten one can, see the module docs).
    pub(crate) fn lock_for_op(&self, access: Access) -> Result<Locked<'_>, String> {
        let locked = self.lock_inner(access)?;
        if matches!(locked.storage(), Storage::Taken) {
            // Unreachable through the public API: the memory is handed back only when nothing
            // can enqueue work on it any more.
            return Err(format!(
                "`{}` was handed back to the host (`PinnedBuffer::into_vec`)",
                self.name()
            ));
        }
        Ok(locked)
    }

    fn lock_inner(&self, access: Access) -> Result<Locked<'_>, String> {
        let attempt = match access {
            Access::Read => self
                .data
                .try_read()
                .map(Locked::Read)
                .map_err(TryLockFailure::from),
            Access::Write => self
                .data
                .try_write()
                .map(Locked::Write)
                .map_err(TryLockFailure::from),
        };
        match attempt {
            Ok(locked) | Err(TryLockFailure::Poisoned(locked)) => return Ok(locked),
            Err(TryLockFailure::WouldBlock) => {}
        }
        if self.is_borrowed() {
            return Err(format!(
                "`{}` is held by a host slice (`as_slice` / `as_mut_slice`) that was never \
                 dropped, so device work can no longer touch it",
                self.name()
            ));
        }
        // Another operation holds it: wait for that one.
        Ok(match access {
            Access::Read => Locked::Read(poisoned(self.data.read())),
            Access::Write => Locked::Write(poisoned(self.data.write())),
        })
    }

    /// Records that work touching the memory was enqueued on the stream with this id (inside
    /// a capture or not), for the free rule.
    pub(crate) fn note_use(&self, stream_id: u64, captured: bool) {
        self.uses.record(StreamUse::tag_for(stream_id, captured));
    }

    /// Gives up `this` handle on `stream_id`'s stream, by the free rule (see
    /// `free_rule::plan_free`): what is left runs and frees the memory when done.
    /// A graph holding the memory, or a capture on the stream, defers the free to it; a free
    /// the rule calls synchronized waits for the work touching the memory first.
    pub(crate) fn free_async(
        this: Arc<Memory>,
        stream_id: u64,
        capturing: bool,
    ) -> Result<FreeMode, CpuFault> {
        if this.graph_holds.load(Ordering::Acquire) != 0 {
            return Ok(FreeMode::Deferred);
        }
        let mode = plan_free(
            this.alloc,
            this.uses.get(),
            StreamUse::tag(stream_id),
            capturing,
        );
        if mode == FreeMode::Synchronized {
            this.wait_for_work()?;
        }
        Ok(mode)
    }

    /// Counts one queued piece of work that touches the memory, until the token drops.
    pub(crate) fn begin_work(self: &Arc<Self>) -> Pending {
        *poisoned(self.pending.lock()) += 1;
        Pending(self.clone())
    }

    /// Whether a host slice is alive (meaningful under [`Memory::gate`]).
    pub(crate) fn is_borrowed(&self) -> bool {
        self.host_borrows.load(Ordering::Acquire) != 0
    }

    /// The gate a graph launch holds while it checks for host slices and enqueues: no slice
    /// can be taken meanwhile, and one taken later waits for the launch.
    pub(crate) fn gate(&self) -> MutexGuard<'_, ()> {
        poisoned(self.gate.lock())
    }

    /// Blocks until no queued work touches the memory any more, and tells the race detector
    /// that the host is now ordered after it. Inside an operation nothing can be waited for.
    pub(crate) fn wait_for_work(&self) -> Result<(), CpuFault> {
        if on_worker_thread() {
            return Err(CpuFault::BlockingCallInsideOp {
                operation: "waiting for the work on a buffer",
            });
        }
        let mut pending = poisoned(self.pending.lock());
        while *pending != 0 {
            pending = poisoned(self.idle.wait(pending));
        }
        drop(pending);
        if self.ctx.checked {
            self.ctx.detector().host_waited_for(self.id);
        }
        Ok(())
    }

    /// Whether queued work touching the memory is still pending.
    pub(crate) fn is_busy(&self) -> bool {
        *poisoned(self.pending.lock()) != 0
    }

    /// Waits for the work that touches the memory, reports the host access to the race
    /// detector, and counts a slice, under the gate.
    fn begin_host_access(&self, access: Access) -> Result<(), CpuFault> {
        if self.kind == MemoryKind::Device {
            return Err(CpuFault::NotHostAccessible {
                buffer: self.name(),
            });
        }
        let _gate = self.gate();
        self.wait_for_work()?;
        let verb = if access.is_write() { "write" } else { "read" };
        self.ctx.host_access(
            format!("host {verb} of {}", self.name()),
            &[(self.id, access, Span::ALL)],
        )?;
        self.host_borrows.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// `len` elements of `T` from byte `offset`, for the host to read.
    pub(crate) fn host_slice<T: Pod>(
        &self,
        offset: usize,
        len: usize,
    ) -> Result<HostSlice<'_, T>, CpuFault> {
        let range = self.view_range::<T>(offset, len)?;
        self.begin_host_access(Access::Read)?;
        let guard = match self.data.try_read() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => self.forgotten_slice(|| self.data.read())?,
        };
        Ok(HostSlice {
            guard,
            range,
            len,
            borrows: &self.host_borrows,
            _elem: std::marker::PhantomData,
        })
    }

    /// `len` elements of `T` from byte `offset`, for the host to write.
    pub(crate) fn host_slice_mut<T: Pod>(
        &self,
        offset: usize,
        len: usize,
    ) -> Result<HostSliceMut<'_, T>, CpuFault> {
        let range = self.view_range::<T>(offset, len)?;
        self.begin_host_access(Access::Write)?;
        let guard = match self.data.try_write() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => self.forgotten_slice(|| self.data.write())?,
        };
        Ok(HostSliceMut {
            guard,
            range,
            len,
            borrows: &self.host_borrows,
            _elem: std::marker::PhantomData,
        })
    }

    /// The first `len` elements of `T` as a `Vec`, for `PinnedBuffer::into_vec`, whose buffer
    /// gives up its handle: after the work that touches the memory has run, the very `Vec`
    /// given to [`Memory::from_vec`] when no graph holds the memory (nothing can touch it any
    /// more, so its storage is taken), a copy otherwise (the graph's replays keep using it).
    pub(crate) fn take_vec<T: Pod + Send + Sync>(&self, len: usize) -> Result<Vec<T>, CpuFault> {
        let range = self.view_range::<T>(0, len)?;
        let _gate = self.gate();
        self.wait_for_work()?;
        self.ctx.host_access(
            format!("host read of {} (into_vec)", self.name()),
            &[(self.id, Access::Read, Span::ALL)],
        )?;
        // A forgotten host slice keeps the lock: the `Vec` cannot be taken then, but a
        // forgotten shared slice still lets the elements be copied out below.
        let writable = match self.data.try_write() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(mut storage) =
            writable.filter(|_| self.graph_holds.load(Ordering::Acquire) == 0)
        {
            let is_ours = matches!(&*storage, Storage::Vec(v) if v.as_any().is::<Vec<T>>());
            if is_ours
                && range.end == self.bytes
                && let Storage::Vec(v) = std::mem::replace(&mut *storage, Storage::Taken)
                && let Ok(vec) = v.into_any().downcast::<Vec<T>>()
            {
                return Ok(*vec);
            }
        }
        let storage = match self.data.try_read() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(CpuFault::BadHostView {
                    buffer: self.name(),
                    detail: "a `Vec`: a forgotten mutable host slice (`mem::forget`) holds it"
                        .to_owned(),
                });
            }
        };
        if std::mem::size_of::<T>() == 0 {
            return Ok(vec![T::zeroed(); len]);
        }
        let mut out = vec![T::zeroed(); len];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&storage.bytes()[range]);
        Ok(out)
    }

    /// The lock of a host slice whose first try found the memory held: by a host slice that
    /// was never dropped (the borrow checker keeps a live one away, and queued work was waited
    /// for), which would hold it for ever, so that is an error rather than a hang; or by an
    /// operation that reads it while this slice reads too, which `lock` waits for. The slice
    /// counted in [`Memory::begin_host_access`] is uncounted on error.
    fn forgotten_slice<G>(
        &self,
        lock: impl FnOnce() -> Result<G, PoisonError<G>>,
    ) -> Result<G, CpuFault> {
        // Ours is counted already: another one means a slice that was never dropped.
        if self.host_borrows.load(Ordering::Acquire) > 1 {
            self.host_borrows.fetch_sub(1, Ordering::AcqRel);
            return Err(CpuFault::ForgottenHostSlice {
                buffer: self.name(),
            });
        }
        Ok(poisoned(lock()))
    }

    fn view_range<T>(&self, offset: usize, len: usize) -> Result<std::ops::Range<usize>, CpuFault> {
        let size = std::mem::size_of::<T>();
        let end = len.checked_mul(size).and_then(|n| n.checked_add(offset));
        match end {
            Some(end)
                if end <= self.bytes
                    && offset.is_multiple_of(std::mem::align_of::<T>())
                    && std::mem::align_of::<T>() <= self.align =>
            {
                Ok(offset..end)
            }
            _ => Err(CpuFault::BadHostView {
                buffer: self.name(),
                detail: format!(
                    "{len} elements of `{}` at byte {offset} of {} bytes",
                    std::any::type_name::<T>(),
                    self.bytes
                ),
            }),
        }
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        self.ctx.release_buffer(self.id);
    }
}

/// A graph node's hold on a [`Memory`]: counted in the memory while it lives, so that the free
/// rule knows a graph still uses it.
#[derive(Debug)]
pub(crate) struct Held(Arc<Memory>);

impl Held {
    /// Holds `memory`.
    pub(crate) fn new(memory: Arc<Memory>) -> Held {
        memory.graph_holds.fetch_add(1, Ordering::AcqRel);
        Held(memory)
    }

    /// The memory.
    pub(crate) fn memory(&self) -> &Arc<Memory> {
        &self.0
    }
}

impl Clone for Held {
    fn clone(&self) -> Self {
        Held::new(self.0.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.graph_holds.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One queued piece of work that touches a [`Memory`]: the host waits for every token of the
/// memory to drop (the work has run, or will never run) before it touches it.
#[derive(Debug)]
pub(crate) struct Pending(Arc<Memory>);

impl Drop for Pending {
    fn drop(&mut self) {
        let mut pending = poisoned(self.0.pending.lock());
        *pending -= 1;
        if *pending == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// A lock an operation holds on one allocation while it runs.
#[derive(Debug)]
pub(crate) enum Locked<'a> {
    /// Read access.
    Read(RwLockReadGuard<'a, Storage>),
    /// Write access.
    Write(RwLockWriteGuard<'a, Storage>),
}

enum TryLockFailure<'a> {
    Poisoned(Locked<'a>),
    WouldBlock,
}

impl<'a> From<std::sync::TryLockError<RwLockReadGuard<'a, Storage>>> for TryLockFailure<'a> {
    fn from(e: std::sync::TryLockError<RwLockReadGuard<'a, Storage>>) -> Self {
        match e {
            std::sync::TryLockError::Poisoned(p) => {
                TryLockFailure::Poisoned(Locked::Read(p.into_inner()))
            }
            std::sync::TryLockError::WouldBlock => TryLockFailure::WouldBlock,
        }
    }
}

impl<'a> From<std::sync::TryLockError<RwLockWriteGuard<'a, Storage>>> for TryLockFailure<'a> {
    fn from(e: std::sync::TryLockError<RwLockWriteGuard<'a, Storage>>) -> Self {
        match e {
            std::sync::TryLockError::Poisoned(p) => {
                TryLockFailure::Poisoned(Locked::Write(p.into_inner()))
            }
            std::sync::TryLockError::WouldBlock => TryLockFailure::WouldBlock,
        }
    }
}

impl Locked<'_> {
    fn storage(&self) -> &Storage {
        match self {
            Locked::Read(g) => g,
            Locked::Write(g) => g,
        }
    }

    /// The bytes, read-only.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.storage().bytes()
    }

    /// The bytes, writable; `None` for a read lock.
    pub(crate) fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Locked::Read(_) => None,
            Locked::Write(g) => Some(g.bytes_mut()),
        }
    }
}

/// The elements of CPU-backend memory, readable by the host; holds the memory's read lock.
pub(crate) struct HostSlice<'a, T> {
    guard: RwLockReadGuard<'a, Storage>,
    range: std::ops::Range<usize>,
    /// Elements (the range alone does not tell for zero-sized ones).
    len: usize,
    borrows: &'a AtomicUsize,
    _elem: std::marker::PhantomData<T>,
}

/// The elements of CPU-backend memory, writable by the host; holds the memory's write lock.
pub(crate) struct HostSliceMut<'a, T> {
    guard: RwLockWriteGuard<'a, Storage>,
    range: std::ops::Range<usize>,
    /// Elements (the range alone does not tell for zero-sized ones).
    len: usize,
    borrows: &'a AtomicUsize,
    _elem: std::marker::PhantomData<T>,
}

impl<T: Pod> HostSlice<'_, T> {
    /// The elements (alignment and bounds were checked when the slice was taken).
    pub(crate) fn get(&self) -> &[T] {
        if std::mem::size_of::<T>() == 0 {
            return zero_sized(self.len);
        }
        bytemuck::cast_slice(&self.guard.bytes()[self.range.clone()])
    }
}

impl<T: Pod> HostSliceMut<'_, T> {
    /// The elements.
    pub(crate) fn get(&self) -> &[T] {
        if std::mem::size_of::<T>() == 0 {
            return zero_sized(self.len);
        }
        bytemuck::cast_slice(&self.guard.bytes()[self.range.clone()])
    }

    /// The elements, mutably.
    pub(crate) fn get_mut(&mut self) -> &mut [T] {
        if std::mem::size_of::<T>() == 0 {
            return zero_sized(self.len);
        }
        bytemuck::cast_slice_mut(&mut self.guard.bytes_mut()[self.range.clone()])
    }
}

impl<T> Drop for HostSlice<'_, T> {
    fn drop(&mut self) {
        self.borrows.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<T> Drop for HostSliceMut<'_, T> {
    fn drop(&mut self) {
        self.borrows.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Locks every allocation in `accesses` (any order, repeats allowed): a write lock where any
/// access writes, a read lock otherwise, taken in [`BufferId`] order so that no two operations
/// wait on each other in a cycle.
pub(crate) fn lock_all<'a>(
    accesses: &'a [(Arc<Memory>, Access)],
) -> Result<Vec<(&'a Memory, Locked<'a>)>, String> {
    let mut merged: Vec<(&Memory, Access)> = accesses.iter().map(|(m, a)| (&**m, *a)).collect();
    merged.sort_by_key(|(m, a)| (m.id(), *a));
    merged.dedup_by(|later, earlier| {
        if later.0.id() == earlier.0.id() {
            earlier.1 = earlier.1.max(later.1);
            true
        } else {
            false
        }
    });
    merged
        .into_iter()
        .map(|(memory, access)| Ok((memory, memory.lock_for_op(access)?)))
        .collect()
}
