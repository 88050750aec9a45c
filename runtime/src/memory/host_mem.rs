//! Host-backend memory: the heap allocations that stand in for device, pinned and managed
//! memory on a host context.
//!
//! Each allocation is registered with the context's race detector (a [`BufferId`] and a name
//! for reports) and carries a lock. Host operations run on stream worker threads, so two
//! operations that no event orders may really run at the same time; on a GPU that is a race
//! with unspecified results, but in Rust it would be a data race, which is undefined
//! behaviour. So every host operation that touches allocations holds, while it runs, a read
//! lock on each allocation it reads and a write lock on each it writes, taken in [`BufferId`]
//! order (no two operations can wait on each other). The locks make unordered operations
//! memory-safe; they do not make them ordered, and the race detector (checked mode) still
//! reports every such pair, since finding the missing event is the point.
//!
//! Operations keep the allocations they touch alive (an `Arc<HostMem>`), so memory is freed
//! only when no queued operation, graph node or buffer holds it, whatever the thread that
//! drops the last buffer handle. Kernel arguments (raw addresses that graph updates may
//! replace) are resolved through a registry of live allocations when the kernel runs, and
//! rejected unless they lie within one.

use std::alloc::Layout;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{
    Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak,
};

use crate::error::{Error, Result};
use crate::host::{Access, BufferId, HostContext, HostOp};

/// Alignment of every host allocation: what `cuMemAlloc` guarantees (256 bytes), so any
/// element type and any vector load a host kernel might use is aligned.
pub(crate) const HOST_ALIGN: usize = 256;

/// One host allocation: `bytes` zeroed bytes at a 256-byte aligned address.
pub(crate) struct HostMem {
    ctx: HostContext,
    ptr: NonNull<u8>,
    layout: Layout,
    bytes: usize,
    id: BufferId,
    lock: RwLock<()>,
    name: Mutex<Arc<str>>,
}

// SAFETY: the memory is plain heap memory owned by this value; every access to it goes
// through the lock (operations) or through the buffer types' host-access rules.
unsafe impl Send for HostMem {}
// SAFETY: as above; the name is behind a mutex, the lock is a lock.
unsafe impl Sync for HostMem {}

/// Live allocations by id, for resolving kernel arguments (see the module docs).
static LIVE: Mutex<Option<HashMap<BufferId, Weak<HostMem>>>> = Mutex::new(None);

fn live() -> MutexGuard<'static, Option<HashMap<BufferId, Weak<HostMem>>>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HostMem {
    /// `bytes` zeroed bytes (zero-length allocations get a unique, aligned address), named
    /// `<kind> #<n>` in race reports until renamed.
    pub(crate) fn new(
        call: &'static str,
        ctx: &HostContext,
        bytes: usize,
        kind: &str,
    ) -> Result<Arc<HostMem>> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let layout = Layout::from_size_align(bytes.max(1), HOST_ALIGN)
            .map_err(|_| Error::invalid(call, format!("{bytes} bytes exceed the address space")))?;
        // SAFETY: `layout` has a non-zero size. Zeroed: any bits are a valid `Pod` value,
        // but uninitialized bytes are not, and `alloc` promises unspecified (not
        // uninitialized) contents.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or_else(|| {
            Error::invalid(
                call,
                format!("out of host memory: {bytes} bytes could not be allocated"),
            )
        })?;
        let serial = NEXT.fetch_add(1, Ordering::Relaxed);
        let name: Arc<str> = Arc::from(format!("{kind} #{serial}"));
        let id = ctx.register_buffer(name.to_string());
        let mem = Arc::new(HostMem {
            ctx: ctx.clone(),
            ptr,
            layout,
            bytes,
            id,
            lock: RwLock::new(()),
            name: Mutex::new(name),
        });
        live()
            .get_or_insert_with(HashMap::new)
            .insert(id, Arc::downgrade(&mem));
        Ok(mem)
    }

    /// The live allocation registered as `id`, if any.
    pub(crate) fn lookup(id: BufferId) -> Option<Arc<HostMem>> {
        live().as_ref()?.get(&id)?.upgrade()
    }

    /// The id the race detector knows it by.
    pub(crate) fn id(&self) -> BufferId {
        self.id
    }

    /// Its length in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The first byte.
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The address as an integer (what `device_ptr` reports on the host backend). Its
    /// provenance is exposed, so code that turns it back into a pointer stays defined.
    pub(crate) fn address(&self) -> u64 {
        self.ptr.as_ptr().expose_provenance() as u64
    }

    /// A pointer to byte `offset`, which must be at most `bytes` (callers pass offsets of
    /// regions checked against the allocation's size).
    pub(crate) fn at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset <= self.bytes);
        self.ptr.as_ptr().wrapping_add(offset)
    }

    /// The name used in race reports and operation labels.
    pub(crate) fn name(&self) -> Arc<str> {
        self.name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Renames the allocation (labels of later operations, and race reports).
    pub(crate) fn set_name(&self, name: &str) {
        *self.name.lock().unwrap_or_else(PoisonError::into_inner) = Arc::from(name);
        self.ctx.name_buffer(self.id, name.to_owned());
    }

    /// The host context it belongs to.
    pub(crate) fn host_context(&self) -> &HostContext {
        &self.ctx
    }
}

impl Drop for HostMem {
    fn drop(&mut self) {
        if let Some(map) = live().as_mut() {
            map.remove(&self.id);
        }
        self.ctx.release_buffer(self.id);
        // SAFETY: allocated in `new` with this layout; this is the last holder, and every
        // operation that touches the memory holds an `Arc` of it, so none is left.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

impl std::fmt::Debug for HostMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMem")
            .field("name", &self.name())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// A lock held by a running host operation.
#[derive(Debug)]
pub(crate) enum HostGuard<'a> {
    /// The operation reads the allocation.
    Read(#[allow(dead_code, reason = "held, never read")] RwLockReadGuard<'a, ()>),
    /// The operation writes the allocation.
    Write(#[allow(dead_code, reason = "held, never read")] RwLockWriteGuard<'a, ()>),
}

/// Locks every allocation in `accesses` (sorted by id, one entry per allocation, as
/// [`merge_accesses`] leaves them): a write lock where it writes, a read lock where it only
/// reads. Poisoning is ignored: a panicking operation leaves plain bytes behind.
pub(crate) fn lock_all<'a>(
    accesses: impl IntoIterator<Item = (&'a HostMem, Access)>,
) -> Vec<HostGuard<'a>> {
    accesses
        .into_iter()
        .map(|(mem, access)| match access {
            Access::Read => {
                HostGuard::Read(mem.lock.read().unwrap_or_else(PoisonError::into_inner))
            }
            Access::Write => {
                HostGuard::Write(mem.lock.write().unwrap_or_else(PoisonError::into_inner))
            }
        })
        .collect()
}

/// Sorts accesses by allocation id and merges repeats (a write wins over a read): the one
/// global order in which operations take their locks, so none waits on another in a cycle.
pub(crate) fn merge_accesses<M: std::ops::Deref<Target = HostMem>>(
    mut accesses: Vec<(M, Access)>,
) -> Vec<(M, Access)> {
    accesses.sort_by_key(|(mem, access)| (mem.id(), *access));
    let mut merged: Vec<(M, Access)> = Vec::with_capacity(accesses.len());
    for (mem, access) in accesses {
        match merged.last_mut() {
            Some(last) if last.0.id() == mem.id() => last.1 = access,
            _ => merged.push((mem, access)),
        }
    }
    merged
}

/// Declares `accesses` on `op`, for the race detector.
pub(crate) fn declare(op: HostOp, accesses: &[(BufferId, Access)]) -> HostOp {
    accesses
        .iter()
        .fold(op, |op, &(buffer, access)| match access {
            Access::Read => op.reads(buffer),
            Access::Write => op.writes(buffer),
        })
}

/// The allocations one operation touches and how, in lock order; what a copy or memset
/// closure captures (keeping the memory alive) and locks while it runs.
#[derive(Debug)]
pub(crate) struct HostAccessSet {
    items: Vec<(Arc<HostMem>, Access)>,
}

impl HostAccessSet {
    /// The set for these accesses (any order, repeats allowed).
    pub(crate) fn new(accesses: Vec<(Arc<HostMem>, Access)>) -> Self {
        HostAccessSet {
            items: merge_accesses(accesses),
        }
    }

    /// The accesses by id, to declare on the op (see [`declare`]).
    pub(crate) fn ids(&self) -> Vec<(BufferId, Access)> {
        self.items.iter().map(|(mem, a)| (mem.id(), *a)).collect()
    }

    /// Takes the locks, in order; the operation runs while the guards live.
    pub(crate) fn lock(&self) -> Vec<HostGuard<'_>> {
        lock_all(self.items.iter().map(|(mem, access)| (&**mem, *access)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::HostContextOptions;

    #[test]
    fn allocations_are_zeroed_aligned_registered_and_released() {
        let ctx = HostContext::new(HostContextOptions { checked: true });
        let mem = HostMem::new("t", &ctx, 1000, "device buffer").unwrap();
        assert_eq!(mem.address() % HOST_ALIGN as u64, 0);
        // SAFETY: 1000 zeroed bytes owned by `mem`, which nothing else touches.
        let bytes = unsafe { std::slice::from_raw_parts(mem.ptr().as_ptr(), 1000) };
        assert!(bytes.iter().all(|&b| b == 0));
        assert!(mem.name().starts_with("device buffer #"));
        mem.set_name("field");
        assert_eq!(&*mem.name(), "field");
        let id = mem.id();
        assert!(HostMem::lookup(id).is_some());
        drop(mem);
        assert!(HostMem::lookup(id).is_none());
        let empty = HostMem::new("t", &ctx, 0, "pinned buffer").unwrap();
        assert_eq!(empty.bytes(), 0);
        assert_eq!(empty.address() % HOST_ALIGN as u64, 0);
    }

    #[test]
    fn accesses_merge_in_id_order_with_writes_winning() {
        let ctx = HostContext::new(HostContextOptions::default());
        let a = HostMem::new("t", &ctx, 8, "a").unwrap();
        let b = HostMem::new("t", &ctx, 8, "b").unwrap();
        let set = HostAccessSet::new(vec![
            (b.clone(), Access::Read),
            (a.clone(), Access::Read),
            (b.clone(), Access::Write),
        ]);
        let order: Vec<(BufferId, Access)> =
            set.items.iter().map(|(m, acc)| (m.id(), *acc)).collect();
        assert_eq!(order, [(a.id(), Access::Read), (b.id(), Access::Write)]);
        let guards = set.lock();
        assert!(matches!(guards[1], HostGuard::Write(_)));
        // A reader of `a` can share; a writer of `b` cannot.
        assert!(a.lock.try_read().is_ok());
        assert!(b.lock.try_read().is_err());
    }

    #[test]
    fn oversized_allocations_are_errors() {
        let ctx = HostContext::new(HostContextOptions::default());
        assert!(HostMem::new("t", &ctx, usize::MAX - 10, "x").is_err());
    }
}
