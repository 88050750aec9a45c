//! Flag words: 8 bytes of page-locked host memory mapped into the device's address space,
//! which streams write and wait on with stream memory operations while the host reads and
//! writes them with atomics.

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::driver::check;
use crate::error::Result;
use crate::sys;

use super::Context;

/// A device-mapped host word.
///
/// Invariant: `host` is an 8-byte aligned word allocated by `cuMemHostAlloc` with
/// `DEVICEMAP` in `ctx`, `device` its device address; it is accessed only through atomics
/// (host) and stream memory operations (device), and freed in `Drop` only after a context
/// synchronize succeeded (leaked otherwise), so no enqueued operation touches freed memory.
pub(crate) struct FlagWord {
    ctx: Arc<Context>,
    host: NonNull<u64>,
    device: sys::CUdeviceptr,
}

// SAFETY: the word is accessed only through atomics; the allocation is process-wide.
unsafe impl Send for FlagWord {}
// SAFETY: as above.
unsafe impl Sync for FlagWord {}

impl FlagWord {
    /// A new word holding 0.
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<FlagWord> {
        let d = ctx.bind()?;
        let mut host = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: a valid out-pointer; freed in Drop (or below).
        check("cuMemHostAlloc", unsafe {
            (d.cuMemHostAlloc)(&mut host, 8, flags)
        })?;
        let Some(word) = NonNull::new(host.cast::<u64>()) else {
            return Err(crate::Error::invalid(
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
        let word = FlagWord {
            ctx: ctx.clone(),
            host: word,
            device,
        };
        word.store_u64(0);
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
        // Operations enqueued on any stream may still write or wait on the word.
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(error = %e, "synchronizing before freeing a flag cell failed; leaking it");
            return;
        }
        let Ok(d) = self.ctx.bind() else {
            return;
        };
        // SAFETY: allocated by cuMemHostAlloc in `new`; all work that could use it finished.
        let code = unsafe { (d.cuMemFreeHost)(self.host.as_ptr().cast()) };
        if !code.is_success() {
            tracing::warn!(?code, "cuMemFreeHost failed while dropping a flag cell");
        }
    }
}

impl std::fmt::Debug for FlagWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlagWord")
            .field("device", &format_args!("{:#x}", self.device))
            .finish()
    }
}
