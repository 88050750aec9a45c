//! The allocations behind every buffer, shared through `Arc` so that whatever may still use
//! the memory (a captured graph, a pending copy) keeps it alive.
//!
//! The soundness rule, enforced here and nowhere else:
//! - memory is freed only when the last holder drops, and the free first waits for all work
//!   that may touch it (device memory: the context is synchronized; pinned memory: its
//!   fences are waited on, then the context);
//! - the host sees pinned memory (`&[T]` / `&mut [T]`) only after every fence recorded for
//!   work that touches it has completed. The fences live in the allocation, not in a guard,
//!   so `mem::forget` of any guard cannot skip them.

use std::any::Any;
use std::sync::{Arc, Mutex};

use crate::context::Context;
use crate::error::{Result, check};
use crate::event::{Event, EventFlags};
use crate::stream::Stream;
use crate::sys;

/// Device memory from `cuMemAlloc` (or a stream-ordered pool; see `kind`).
pub(crate) struct DeviceAlloc {
    pub(crate) ctx: Context,
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) bytes: usize,
}

// SAFETY: a device address is a plain integer usable from any thread; the driver frees it once.
unsafe impl Send for DeviceAlloc {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for DeviceAlloc {}

impl DeviceAlloc {
    /// `bytes` of device memory (at least one byte is requested, so the address is unique).
    pub(crate) fn new(ctx: &Context, bytes: usize) -> Result<DeviceAlloc> {
        let c = ctx.bound_cuda("DeviceBuffer::alloc")?;
        let mut ptr = 0;
        // SAFETY: a valid out-pointer; freed in Drop.
        check("cuMemAlloc", unsafe {
            (c.driver.cuMemAlloc)(&mut ptr, bytes.max(1))
        })?;
        Ok(DeviceAlloc {
            ctx: ctx.clone(),
            ptr,
            bytes,
        })
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        // Work enqueued on any stream may still read or write this memory: wait for it all.
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(error = %e, "synchronizing before freeing device memory failed");
        }
        let Ok(c) = self.ctx.bound_cuda("DeviceBuffer::drop") else {
            return;
        };
        // SAFETY: allocated by cuMemAlloc; nothing can use it any more (see above).
        let code = unsafe { (c.driver.cuMemFree)(self.ptr) };
        if !code.is_success() {
            tracing::warn!(?code, "cuMemFree failed while dropping device memory");
        }
    }
}

/// Page-locked host memory from `cuMemHostAlloc`, with the fences of pending device work.
pub(crate) struct PinnedAlloc {
    pub(crate) ctx: Context,
    pub(crate) ptr: *mut u8,
    pub(crate) bytes: usize,
    /// One event per stream (by the driver's unique stream id, never reused), re-recorded after each enqueue there that touches this memory
    /// (a later record on a stream covers everything before it, in stream order). The host
    /// waits on all of them before it reads or writes.
    fences: Mutex<Vec<(u64, Event)>>,
}

// SAFETY: the memory is plain host memory; host access goes through `&`/`&mut` of the buffer
// after `wait_for_device`, which serialises with the device through the fences.
unsafe impl Send for PinnedAlloc {}
// SAFETY: as above; the fence list is behind a Mutex.
unsafe impl Sync for PinnedAlloc {}

impl PinnedAlloc {
    /// `bytes` of page-locked, portable host memory.
    pub(crate) fn new(ctx: &Context, bytes: usize) -> Result<PinnedAlloc> {
        let c = ctx.bound_cuda("PinnedBuffer::alloc")?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; freed in Drop.
        check("cuMemHostAlloc", unsafe {
            (c.driver.cuMemHostAlloc)(&mut ptr, bytes.max(1), sys::CU_MEMHOSTALLOC_PORTABLE)
        })?;
        Ok(PinnedAlloc {
            ctx: ctx.clone(),
            ptr: ptr.cast(),
            bytes,
            fences: Mutex::new(Vec::new()),
        })
    }

    /// Records a fence on `stream` after the work just enqueued there that touches this
    /// memory. Call it after every enqueue (or graph launch) that reads or writes it.
    pub(crate) fn fence_after(&self, stream: &Stream) -> Result<()> {
        let mut fences = self.fences.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, event)) = fences.iter().find(|(id, _)| *id == stream.unique_id()) {
            return stream.record_into(event);
        }
        let event = Event::with_flags(&self.ctx, EventFlags::ORDERING)?;
        stream.record_into(&event)?;
        fences.push((stream.unique_id(), event));
        Ok(())
    }

    /// Blocks until no enqueued work touches this memory any more. Errors from the device
    /// (an asynchronous fault) are returned.
    pub(crate) fn wait_for_device(&self) -> Result<()> {
        let fences = self.fences.lock().unwrap_or_else(|p| p.into_inner());
        let mut first_error = None;
        // The events stay for reuse: a completed event is cheap to wait on again.
        for (_, fence) in fences.iter() {
            if let Err(e) = fence.synchronize() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Whether any fence is still pending (without blocking).
    pub(crate) fn is_busy(&self) -> Result<bool> {
        let fences = self.fences.lock().unwrap_or_else(|p| p.into_inner());
        for (_, fence) in fences.iter() {
            if !fence.query()? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        if let Err(e) = self.wait_for_device() {
            tracing::warn!(error = %e, "waiting for device work before freeing pinned memory failed");
        }
        let Ok(c) = self.ctx.bound_cuda("PinnedBuffer::drop") else {
            return;
        };
        // SAFETY: allocated by cuMemHostAlloc; no fence is pending and no holder remains.
        let code = unsafe { (c.driver.cuMemFreeHost)(self.ptr.cast()) };
        if !code.is_success() {
            tracing::warn!(?code, "cuMemFreeHost failed while dropping pinned memory");
        }
    }
}

/// Something a captured graph's nodes point at, kept alive by the graph (and by every
/// executable graph instantiated from it) for as long as it can be launched.
#[derive(Clone)]
pub(crate) enum KeepAlive {
    /// Device memory a node reads or writes.
    Device(Arc<DeviceAlloc>),
    /// Pinned host memory a node copies from or to: each launch also fences it, so the host
    /// waits for the launch before touching the memory.
    Pinned(Arc<PinnedAlloc>),
    /// Anything else (a host closure, a loaded module).
    Object(Arc<dyn Any + Send + Sync>),
}
