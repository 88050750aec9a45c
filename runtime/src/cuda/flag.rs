//! Flag words: 8 bytes of page-locked host memory mapped into the device's address space,
//! which streams write and wait on with stream memory operations while the host reads and
//! writes them with atomics.

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::error::Result;
use crate::sys;

use super::Context;
use super::slab::FlagSlot;

/// A device-mapped host word.
///
/// Invariant: `host` is an 8-byte aligned word of a page of `ctx`'s flag slab (allocated by
/// `cuMemHostAlloc` with `DEVICEMAP`), lent to this word alone, `device` its device address;
/// it is accessed only through atomics (host) and stream memory operations (device), and
/// handed back in `Drop` only after a context synchronize succeeded (never, otherwise), so no
/// operation enqueued for this word touches it once another word has it.
pub(crate) struct FlagWord {
    ctx: Arc<Context>,
    host: NonNull<u64>,
    device: sys::CUdeviceptr,
    /// Only one graph's nodes use it (a loop's state): dropped inside a `Quiesced` scope of
    /// its context, it needs no synchronize of its own.
    private: bool,
}

// SAFETY: the word is accessed only through atomics; the allocation is process-wide.
unsafe impl Send for FlagWord {}
// SAFETY: as above.
unsafe impl Sync for FlagWord {}

impl FlagWord {
    /// A new word holding 0: one of the context's slab (a page is pinned and mapped only
    /// when every word of the pages so far is in use).
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<FlagWord> {
        let d = ctx.bind()?;
        let FlagSlot { host, device } = ctx.flag_slab().take(d)?;
        let word = FlagWord {
            ctx: ctx.clone(),
            host,
            device,
            private: false,
        };
        word.store_u64(0);
        Ok(word)
    }

    /// A new word holding 0 that only one graph's nodes will use (a loop's state), so that a
    /// drop inside a `Quiesced` scope of its context need not wait for it.
    pub(crate) fn new_private(ctx: &Arc<Context>) -> Result<FlagWord> {
        let mut word = FlagWord::new(ctx)?;
        word.private = true;
        Ok(word)
    }

    /// The device address stream memory operations use.
    pub(crate) fn device_address(&self) -> sys::CUdeviceptr {
        self.device
    }

    fn atomic32(&self) -> &AtomicU32 {
        // SAFETY: the low 4 bytes of a live, 8-byte aligned word that is only ever accessed
        // atomically (the type's invariant), for as long as `self` lives.
        unsafe { AtomicU32::from_ptr(self.host.as_ptr().cast()) }
    }

    fn atomic64(&self) -> &AtomicU64 {
        // SAFETY: as in `atomic32`, the whole word.
        unsafe { AtomicU64::from_ptr(self.host.as_ptr()) }
    }

    /// Reads the low 32 bits.
    pub(crate) fn load_u32(&self) -> u32 {
        self.atomic32().load(Ordering::Acquire)
    }

    /// Writes the low 32 bits.
    pub(crate) fn store_u32(&self, value: u32) {
        self.atomic32().store(value, Ordering::Release)
    }

    /// Reads the word.
    pub(crate) fn load_u64(&self) -> u64 {
        self.atomic64().load(Ordering::Acquire)
    }

    /// Writes the word.
    pub(crate) fn store_u64(&self, value: u64) {
        self.atomic64().store(value, Ordering::Release)
    }
}

impl Drop for FlagWord {
    fn drop(&mut self) {
        // Operations enqueued on any stream may still write or wait on the word (unless only
        // one graph's nodes use it and its owner just synchronized the context).
        let quiesced = self.private && super::quiesced::covers(&self.ctx);
        if let Err(e) = (!quiesced).then(|| self.ctx.synchronize()).transpose() {
            tracing::warn!(error = %e, "synchronizing before freeing a flag cell failed; leaking it");
            return;
        }
        // All work that could use it finished: the next word made may be this one.
        self.ctx.flag_slab().give_back(FlagSlot {
            host: self.host,
            device: self.device,
        });
    }
}

impl std::fmt::Debug for FlagWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlagWord")
            .field("device", &format_args!("{:#x}", self.device))
            .finish()
    }
}
