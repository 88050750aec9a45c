//! Small pieces of memory a context keeps in pages and hands out one slot at a time, so that
//! building a graph with a device `while` or `if` and dropping it pins no host page, frees no
//! device memory, and waits for no allocation per conditional node:
//!
//! - [`FlagPages`]: 8-byte words of device-mapped host memory, for flag words (loop states,
//!   progress marks, step counters), which the host reads and writes with atomics;
//! - [`WordPages`]: 16-byte slots of device memory, for a graph's condition words (12 bytes)
//!   and loop counters (16 bytes).
//!
//! A slot is handed back by its owner's drop after the wait that drop makes (or inside the
//! `Quiesced` scope it is dropped in), so no enqueued work still uses it; one whose drop could
//! not wait is never handed back, and its page then outlives the context.

use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

use crate::driver::{Driver, check};
use crate::error::{Error, Result};
use crate::sys;

/// One kind of page: how it is made and freed, and where its slots are.
pub(crate) trait PageKind {
    /// A slot's address (or addresses).
    type Slot: Copy;
    /// Slots per page.
    const SLOTS: usize;
    /// What the slots are for, in a warning.
    const WHAT: &'static str;
    /// A new zeroed page (`d` with the context bound): its first slot.
    fn alloc(d: &Driver) -> Result<Self::Slot>;
    /// Slot `index` (< `SLOTS`) of the page whose first slot is `first`.
    fn slot(first: Self::Slot, index: usize) -> Self::Slot;
    /// Frees the page whose first slot is `first`.
    ///
    /// # Safety
    /// `first` came from [`alloc`](PageKind::alloc) in the bound context, and no slot of the
    /// page is used, by the host or by enqueued work, any more.
    unsafe fn free(d: &Driver, first: Self::Slot) -> sys::CUresult;
}

/// The pages of one context and its slots not in use.
///
/// Invariant: every page was made by `K::alloc` in the owning context and is freed only by
/// [`Slab::release`], which the context calls from its drop, after every owner of a slot
/// (each holds the context) is gone, and only when every slot handed out was handed back
/// (`lent` is 0; else they are leaked). A slot is on `free` only once no enqueued work can
/// touch it.
pub(crate) struct Slab<K: PageKind> {
    inner: Mutex<Pages<K::Slot>>,
}

struct Pages<S> {
    /// Each page's first slot.
    pages: Vec<S>,
    /// Slots of the last page not handed out yet.
    unused: usize,
    /// Slots handed back.
    free: Vec<S>,
    /// Slots handed out and not handed back.
    lent: usize,
}

// SAFETY: the slots are process-wide allocations (host pointers or device addresses), used
// through the mutex and then by the one owner a slot is lent to.
unsafe impl<K: PageKind> Send for Slab<K> {}
// SAFETY: as above.
unsafe impl<K: PageKind> Sync for Slab<K> {}

impl<K: PageKind> Default for Slab<K> {
    fn default() -> Self {
        Slab {
            inner: Mutex::new(Pages {
                pages: Vec::new(),
                unused: 0,
                free: Vec::new(),
                lent: 0,
            }),
        }
    }
}

impl<K: PageKind> Slab<K> {
    /// A slot (`d` with the context bound): one handed back, or the next of the last page, or
    /// the first of a new page. Its contents are whatever they were.
    pub(crate) fn take(&self, d: &Driver) -> Result<K::Slot> {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = pages.free.pop() {
            pages.lent += 1;
            return Ok(slot);
        }
        if pages.unused == 0 {
            let first = K::alloc(d)?;
            pages.pages.push(first);
            pages.unused = K::SLOTS;
        }
        let first = *pages.pages.last().expect("a page was just made");
        let index = K::SLOTS - pages.unused;
        pages.unused -= 1;
        pages.lent += 1;
        Ok(K::slot(first, index))
    }

    /// Hands `slot` back: its owner's drop waited for the work that could use it.
    pub(crate) fn give_back(&self, slot: K::Slot) {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        pages.lent -= 1;
        pages.free.push(slot);
    }

    /// Frees every page (`d` with the context bound). Only the context's drop calls it: no
    /// owner of a slot is left. A slot never handed back (its owner's wait failed, so work may
    /// still use it) leaks every page instead.
    pub(crate) fn release(&self, d: &Driver) {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        pages.free.clear();
        pages.unused = 0;
        if pages.lent != 0 {
            tracing::warn!(
                slots = pages.lent,
                "{} whose work could not be waited for were leaked; so are their pages",
                K::WHAT
            );
            pages.pages.clear();
            return;
        }
        for first in pages.pages.drain(..) {
            // SAFETY: made by `K::alloc` in `take`; no slot of it is lent (none is left, the
            // caller's promise, and `lent` is 0) and no work uses it (each was handed back
            // after a wait).
            let code = unsafe { K::free(d, first) };
            if !code.is_success() {
                tracing::warn!(?code, "freeing a page of {} failed", K::WHAT);
            }
        }
    }
}

/// A flag word's host address and device address.
#[derive(Clone, Copy)]
pub(crate) struct FlagSlot {
    pub(crate) host: NonNull<u64>,
    pub(crate) device: sys::CUdeviceptr,
}

/// Pages of 512 device-mapped host words (one 4 KiB page each).
pub(crate) enum FlagPages {}

impl PageKind for FlagPages {
    type Slot = FlagSlot;
    const SLOTS: usize = 512;
    const WHAT: &'static str = "flag words";

    fn alloc(d: &Driver) -> Result<FlagSlot> {
        let bytes = Self::SLOTS * std::mem::size_of::<u64>();
        let mut host = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: a valid out-pointer; freed in `free` (or below).
        check("cuMemHostAlloc", unsafe {
            (d.cuMemHostAlloc)(&mut host, bytes, flags)
        })?;
        let Some(first) = NonNull::new(host.cast::<u64>()) else {
            return Err(Error::invalid(
                "FlagCell::new",
                "cuMemHostAlloc returned a null pointer",
            ));
        };
        let mut device = 0;
        // SAFETY: `host` was just allocated with DEVICEMAP; flags must be 0.
        let code = unsafe { (d.cuMemHostGetDevicePointer)(&mut device, host, 0) };
        if let Err(e) = check("cuMemHostGetDevicePointer", code) {
            // SAFETY: allocated above and not yet shared with any work.
            unsafe { (d.cuMemFreeHost)(host) };
            return Err(e);
        }
        // SAFETY: `bytes` bytes of host memory just allocated; nothing else sees them yet.
        unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, bytes) };
        Ok(FlagSlot {
            host: first,
            device,
        })
    }

    fn slot(first: FlagSlot, index: usize) -> FlagSlot {
        FlagSlot {
            // SAFETY: `index` < SLOTS words into a page of that many.
            host: unsafe { first.host.add(index) },
            device: first.device + (index * std::mem::size_of::<u64>()) as sys::CUdeviceptr,
        }
    }

    unsafe fn free(d: &Driver, first: FlagSlot) -> sys::CUresult {
        // SAFETY: the caller's promise: allocated by cuMemHostAlloc in `alloc`, unused.
        unsafe { (d.cuMemFreeHost)(first.host.as_ptr().cast()) }
    }
}

/// The bytes of a device slot: the largest word group a graph asks for.
pub(crate) const WORD_SLOT_BYTES: usize = 16;

/// Pages of 4096 device slots of `WORD_SLOT_BYTES` (one 64 KiB allocation each).
pub(crate) enum WordPages {}

impl PageKind for WordPages {
    type Slot = sys::CUdeviceptr;
    const SLOTS: usize = 4096;
    const WHAT: &'static str = "graph words";

    fn alloc(d: &Driver) -> Result<sys::CUdeviceptr> {
        let mut page = 0;
        // SAFETY: a valid out-pointer; freed in `free`.
        check("cuMemAlloc", unsafe {
            (d.cuMemAlloc)(&mut page, WORD_SLOT_BYTES * Self::SLOTS)
        })?;
        Ok(page)
    }

    fn slot(first: sys::CUdeviceptr, index: usize) -> sys::CUdeviceptr {
        first + (index * WORD_SLOT_BYTES) as sys::CUdeviceptr
    }

    unsafe fn free(d: &Driver, first: sys::CUdeviceptr) -> sys::CUresult {
        // SAFETY: the caller's promise: allocated by cuMemAlloc in `alloc`, unused.
        unsafe { (d.cuMemFree)(first) }
    }
}
