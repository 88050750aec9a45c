//! Where a graph's small device words come from (the 12 bytes of a kernel-set condition's
//! words, the 16 of a loop's counter): slots of device pages that a context keeps, so that
//! building a graph with a device `while` or `if` and dropping it is not a `cuMemAlloc` and a
//! `cuMemFree` per conditional node. A slot is handed back by its memory's drop, after the
//! wait that drop makes (or the `Quiesced` scope it is dropped in), so no work still uses it.

use std::sync::{Mutex, PoisonError};

use crate::driver::{Driver, check};
use crate::error::Result;
use crate::sys;

/// The bytes of a slot: the largest word group a graph asks for.
pub(crate) const SLOT_BYTES: usize = 16;
/// Slots per page: one 64 KiB device allocation.
const SLOTS_PER_PAGE: usize = 4096;

/// The pages of one context and its slots not in use.
///
/// Invariant: every page was allocated by `cuMemAlloc` in the owning context and is freed only
/// by [`WordSlab::release`], which the context calls from its drop, after every memory lent a
/// slot (each holds the context) is gone, and only when every slot handed out was handed back
/// (`lent` is 0; else they are leaked). A slot is on `free` only once no enqueued work can
/// touch it.
#[derive(Default)]
pub(crate) struct WordSlab {
    inner: Mutex<Pages>,
}

#[derive(Default)]
struct Pages {
    /// Each page's address.
    pages: Vec<sys::CUdeviceptr>,
    /// Slots of the last page not handed out yet.
    unused: usize,
    /// Slots handed back.
    free: Vec<sys::CUdeviceptr>,
    /// Slots handed out and not handed back: a slot whose drop could not wait for its work
    /// is never handed back, and its page must then outlive the context.
    lent: usize,
}

impl WordSlab {
    /// A slot of `SLOT_BYTES` (`d` with the context bound): one handed back, or the next of the
    /// last page, or the first of a new page. Its contents are whatever they were.
    pub(crate) fn take(&self, d: &Driver) -> Result<sys::CUdeviceptr> {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = pages.free.pop() {
            pages.lent += 1;
            return Ok(slot);
        }
        if pages.unused == 0 {
            let mut page = 0;
            // SAFETY: a valid out-pointer; freed in `release`.
            check("cuMemAlloc", unsafe {
                (d.cuMemAlloc)(&mut page, SLOT_BYTES * SLOTS_PER_PAGE)
            })?;
            pages.pages.push(page);
            pages.unused = SLOTS_PER_PAGE;
        }
        let page = *pages.pages.last().expect("a page was just made");
        let index = SLOTS_PER_PAGE - pages.unused;
        pages.unused -= 1;
        pages.lent += 1;
        Ok(page + (index * SLOT_BYTES) as sys::CUdeviceptr)
    }

    /// Hands `slot` back: its memory's drop waited for the work that could use it.
    pub(crate) fn give_back(&self, slot: sys::CUdeviceptr) {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        pages.lent -= 1;
        pages.free.push(slot);
    }

    /// Frees every page (`d` with the context bound). Only the context's drop calls it: no
    /// slot is held any more. A slot never handed back (its drop's synchronize failed, so
    /// work may still use it) leaks every page instead.
    pub(crate) fn release(&self, d: &Driver) {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        pages.free.clear();
        pages.unused = 0;
        if pages.lent != 0 {
            tracing::warn!(
                slots = pages.lent,
                "graph words whose work could not be waited for were leaked; so are their pages"
            );
            pages.pages.clear();
            return;
        }
        for page in pages.pages.drain(..) {
            // SAFETY: allocated by cuMemAlloc in `take`; no slot of it is lent (the caller's
            // promise) and no work uses it (each slot was handed back after a wait).
            let code = unsafe { (d.cuMemFree)(page) };
            if !code.is_success() {
                tracing::warn!(?code, "cuMemFree failed while freeing graph words");
            }
        }
    }
}
