//! Where flag words come from: pages of device-mapped host memory that a context keeps and
//! hands out word by word, so that making a word (every loop's state, every progress mark,
//! every step counter of a graph) is not a page pinned and mapped (`cuMemHostAlloc`), nor
//! dropping one a page unmapped (`cuMemFreeHost`). A captured step with a device `while` or
//! `if` made and dropped per call, as NVIDIA's graphConditionalNodes does, paid both.

use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

use crate::driver::{Driver, check};
use crate::error::{Error, Result};
use crate::sys;

/// Words per page: one 4 KiB page.
const WORDS_PER_PAGE: usize = 512;

/// One word: its host address and its device address.
#[derive(Clone, Copy)]
pub(crate) struct SlabWord {
    pub(crate) host: NonNull<u64>,
    pub(crate) device: sys::CUdeviceptr,
}

/// The pages of one context and its words not in use.
///
/// Invariant: every page was allocated by `cuMemHostAlloc` (`DEVICEMAP`, `PORTABLE`) in the
/// owning context and is freed only by [`FlagSlab::release`], which the context calls from
/// its drop, after every `FlagWord` (each holds the context) is gone, and only when every
/// word handed out was handed back (`lent` is 0; else they are leaked). A word is on `free`
/// only once no enqueued work can touch it (`FlagWord`'s drop puts it back after a context
/// synchronize).
#[derive(Default)]
pub(crate) struct FlagSlab {
    inner: Mutex<Pages>,
}

#[derive(Default)]
struct Pages {
    /// Each page's first word.
    pages: Vec<SlabWord>,
    /// Words of the last page not handed out yet.
    unused: usize,
    /// Words handed back.
    free: Vec<SlabWord>,
    /// Words handed out and not handed back: a word whose drop could not wait for its work
    /// is never handed back, and its page must then outlive the context.
    lent: usize,
}

// SAFETY: the pointers are process-wide host allocations, used only through the mutex (and by
// the one `FlagWord` a word is lent to).
unsafe impl Send for FlagSlab {}
// SAFETY: as above.
unsafe impl Sync for FlagSlab {}

impl FlagSlab {
    /// A word for a new `FlagWord`: one handed back, or the next of the last page, or the
    /// first of a new page (`d` with the context bound). Its value is whatever it held.
    pub(crate) fn take(&self, d: &Driver) -> Result<SlabWord> {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(word) = pages.free.pop() {
            pages.lent += 1;
            return Ok(word);
        }
        if pages.unused == 0 {
            let first = new_page(d)?;
            pages.pages.push(first);
            pages.unused = WORDS_PER_PAGE;
        }
        let first = *pages.pages.last().expect("a page was just made");
        let index = WORDS_PER_PAGE - pages.unused;
        pages.unused -= 1;
        pages.lent += 1;
        // SAFETY: `index` < WORDS_PER_PAGE words into a page of that many.
        let host = unsafe { first.host.add(index) };
        Ok(SlabWord {
            host,
            device: first.device + (index * std::mem::size_of::<u64>()) as sys::CUdeviceptr,
        })
    }

    /// Hands `word` back. The caller (a `FlagWord`'s drop) has synchronized the context: no
    /// work enqueued before can touch it any more.
    pub(crate) fn give_back(&self, word: SlabWord) {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        pages.lent -= 1;
        pages.free.push(word);
    }

    /// Frees every page (`d` with the context bound). Only the context's drop calls it: no
    /// word is held any more. A word never handed back (its drop's synchronize failed, so
    /// work may still write it) leaks every page instead.
    pub(crate) fn release(&self, d: &Driver) {
        let mut pages = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        pages.free.clear();
        pages.unused = 0;
        if pages.lent != 0 {
            tracing::warn!(
                words = pages.lent,
                "flag words whose work could not be waited for were leaked; so are their pages"
            );
            pages.pages.clear();
            return;
        }
        for page in pages.pages.drain(..) {
            // SAFETY: allocated by cuMemHostAlloc in `new_page`; no word of it is lent (the
            // caller's promise) and no work uses it (each word was handed back after a
            // synchronize).
            let code = unsafe { (d.cuMemFreeHost)(page.host.as_ptr().cast()) };
            if !code.is_success() {
                tracing::warn!(?code, "cuMemFreeHost failed while freeing flag words");
            }
        }
    }
}

/// A new zeroed page of `WORDS_PER_PAGE` device-mapped words.
fn new_page(d: &Driver) -> Result<SlabWord> {
    let bytes = WORDS_PER_PAGE * std::mem::size_of::<u64>();
    let mut host = std::ptr::null_mut();
    let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
    // SAFETY: a valid out-pointer; freed in `release` (or below).
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
    Ok(SlabWord {
        host: first,
        device,
    })
}
