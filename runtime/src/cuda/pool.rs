//! Memory pools: where stream-ordered allocations come from and return to.

use std::ffi::c_void;
use std::sync::Arc;

use crate::driver::check;
use crate::error::Result;
use crate::sys::{self, CUmemPool_attribute};

use super::Context;

/// A device's default memory pool.
///
/// Invariant: `raw` is the default pool of `ctx`'s device (`cuDeviceGetDefaultMemPool`),
/// owned by the device and alive as long as the context that `ctx` retains.
pub(crate) struct MemoryPool {
    ctx: Arc<Context>,
    raw: sys::CUmemoryPool,
}

// SAFETY: a memory pool handle may be used from any thread; it lives as long as `ctx`.
unsafe impl Send for MemoryPool {}
// SAFETY: as above; every method maps to a thread-safe driver call.
unsafe impl Sync for MemoryPool {}

impl MemoryPool {
    /// The default pool of the context's device.
    pub(crate) fn default_for(ctx: &Arc<Context>) -> Result<MemoryPool> {
        let d = ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and device handle.
        check("cuDeviceGetDefaultMemPool", unsafe {
            (d.cuDeviceGetDefaultMemPool)(&mut raw, ctx.device().handle())
        })?;
        Ok(MemoryPool {
            ctx: ctx.clone(),
            raw,
        })
    }

    /// The raw handle (the type's invariant keeps it alive).
    pub(crate) fn raw(&self) -> sys::CUmemoryPool {
        self.raw
    }

    /// A `cuuint64_t` attribute.
    pub(crate) fn get_u64(&self, attribute: CUmemPool_attribute) -> Result<u64> {
        let d = self.ctx.bind()?;
        let mut value: u64 = 0;
        // SAFETY: a live pool; the attributes read through here are all `cuuint64_t`.
        check("cuMemPoolGetAttribute", unsafe {
            (d.cuMemPoolGetAttribute)(self.raw, attribute, (&raw mut value).cast::<c_void>())
        })?;
        Ok(value)
    }

    /// Sets a `cuuint64_t` attribute.
    pub(crate) fn set_u64(&self, attribute: CUmemPool_attribute, mut value: u64) -> Result<()> {
        let d = self.ctx.bind()?;
        // SAFETY: a live pool; the attributes written through here are all `cuuint64_t`,
        // read during the call.
        check("cuMemPoolSetAttribute", unsafe {
            (d.cuMemPoolSetAttribute)(self.raw, attribute, (&raw mut value).cast::<c_void>())
        })
    }

    /// Releases reserved memory no allocation uses, down to `keep_bytes`.
    pub(crate) fn trim_to(&self, keep_bytes: usize) -> Result<()> {
        let d = self.ctx.bind()?;
        // SAFETY: a live pool; trimming releases only memory no allocation uses.
        check("cuMemPoolTrimTo", unsafe {
            (d.cuMemPoolTrimTo)(self.raw, keep_bytes)
        })
    }
}

impl std::fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::MemoryPool")
            .field("raw", &self.raw)
            .finish()
    }
}
