//! Flag cells: one 32- or 64-bit word that streams write and wait on with the stream memory
//! operations, and that the host can read and write while streams wait on it.
//!
//! The word lives in page-locked host memory mapped into the device's address space, so the
//! host reads and writes it with plain atomics (no copy, no stream, no deadlock with a stream
//! that is waiting on it) and the device reaches it through the same unified address.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::context::Context;
use crate::driver::check;
use crate::error::Result;
use crate::sys;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// The word types a [`FlagCell`] can hold: `u32` and `u64`.
pub trait FlagWord: sealed::Sealed + Copy + Send + Sync + std::fmt::Debug + 'static {
    /// Reads the word atomically.
    ///
    /// # Safety
    /// `ptr` must point to a live word aligned for `Self` that is only accessed atomically.
    #[doc(hidden)]
    unsafe fn load(ptr: *const Self) -> Self;
    /// Writes the word atomically.
    ///
    /// # Safety
    /// As for [`FlagWord::load`].
    #[doc(hidden)]
    unsafe fn store(ptr: *mut Self, value: Self);
}

impl FlagWord for u32 {
    unsafe fn load(ptr: *const Self) -> Self {
        // SAFETY: the caller's contract; the device writes the word concurrently, which is
        // what atomics are for.
        unsafe { AtomicU32::from_ptr(ptr.cast_mut()) }.load(Ordering::Acquire)
    }
    unsafe fn store(ptr: *mut Self, value: Self) {
        // SAFETY: as in `load`.
        unsafe { AtomicU32::from_ptr(ptr) }.store(value, Ordering::Release)
    }
}

impl FlagWord for u64 {
    unsafe fn load(ptr: *const Self) -> Self {
        // SAFETY: as for u32.
        unsafe { AtomicU64::from_ptr(ptr.cast_mut()) }.load(Ordering::Acquire)
    }
    unsafe fn store(ptr: *mut Self, value: Self) {
        // SAFETY: as for u32.
        unsafe { AtomicU64::from_ptr(ptr) }.store(value, Ordering::Release)
    }
}

/// A word streams signal and wait on ([`Stream::write_value_32`](crate::Stream::write_value_32),
/// [`Stream::wait_value_32`](crate::Stream::wait_value_32) and the 64-bit forms).
///
/// The word is shared: a captured graph that writes or waits on it keeps it alive. When the
/// last holder drops, the context is synchronized first, so no enqueued operation can touch
/// the word after it is freed. A stream waiting on a value nobody will write blocks that
/// drop, as it would block any synchronize.
pub struct FlagCell<W: FlagWord = u32> {
    word: Arc<FlagWordAlloc>,
    _word: PhantomData<W>,
}

/// The 8 bytes behind a flag cell: pinned and device-mapped on CUDA, heap memory on the host.
pub(crate) struct FlagWordAlloc {
    ctx: Context,
    host: *mut u64,
    device: sys::CUdeviceptr,
}

// SAFETY: the word is accessed only through atomics; the allocation is process-wide.
unsafe impl Send for FlagWordAlloc {}
// SAFETY: as above.
unsafe impl Sync for FlagWordAlloc {}

impl FlagWordAlloc {
    fn new(ctx: &Context) -> Result<FlagWordAlloc> {
        if ctx.host_context().is_some() {
            let word = Box::into_raw(Box::new(0_u64));
            return Ok(FlagWordAlloc {
                ctx: ctx.clone(),
                host: word,
                device: word as sys::CUdeviceptr,
            });
        }
        let c = ctx.bound_cuda("FlagCell::new")?;
        let mut host = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: a valid out-pointer; freed in Drop.
        check("cuMemHostAlloc", unsafe {
            (c.driver.cuMemHostAlloc)(&mut host, 8, flags)
        })?;
        let mut device = 0;
        // SAFETY: `host` was just allocated with DEVICEMAP; flags must be 0.
        let code = unsafe { (c.driver.cuMemHostGetDevicePointer)(&mut device, host, 0) };
        if let Err(e) = check("cuMemHostGetDevicePointer", code) {
            // SAFETY: allocated above and not yet shared.
            unsafe { (c.driver.cuMemFreeHost)(host) };
            return Err(e);
        }
        Ok(FlagWordAlloc {
            ctx: ctx.clone(),
            host: host.cast(),
            device,
        })
    }

    pub(crate) fn load<W: FlagWord>(&self) -> W {
        // SAFETY: `host` is this allocation's 8-byte-aligned word, live until Drop, and only
        // ever accessed through these atomics (host) or stream memory operations (device).
        unsafe { W::load(self.host.cast()) }
    }

    pub(crate) fn store<W: FlagWord>(&self, value: W) {
        // SAFETY: as in `load`.
        unsafe { W::store(self.host.cast(), value) }
    }
}

impl Drop for FlagWordAlloc {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(error = %e, "synchronizing before freeing a flag cell failed");
        }
        if self.ctx.host_context().is_some() {
            // SAFETY: allocated by Box in `new`; every queued op holding the word has run.
            drop(unsafe { Box::from_raw(self.host) });
            return;
        }
        let Ok(c) = self.ctx.bound_cuda("FlagCell::drop") else {
            return;
        };
        // SAFETY: allocated by cuMemHostAlloc in `new`; all work that could use it finished.
        let code = unsafe { (c.driver.cuMemFreeHost)(self.host.cast()) };
        if !code.is_success() {
            tracing::warn!(?code, "cuMemFreeHost failed while dropping a flag cell");
        }
    }
}

impl<W: FlagWord> FlagCell<W> {
    /// A new cell holding `initial`.
    pub fn new(ctx: &Context, initial: W) -> Result<FlagCell<W>> {
        let word = FlagWordAlloc::new(ctx)?;
        word.store(initial);
        Ok(FlagCell {
            word: Arc::new(word),
            _word: PhantomData,
        })
    }

    /// The current value, as the host sees it now.
    pub fn load(&self) -> W {
        self.word.load()
    }

    /// Writes a value from the host; a stream waiting on the cell sees it.
    pub fn store(&self, value: W) {
        self.word.store(value)
    }

    /// The device address of the word, for kernels and interop (a host address on the host
    /// backend).
    pub fn device_address(&self) -> sys::CUdeviceptr {
        self.word.device
    }

    /// The context the cell belongs to.
    pub fn context(&self) -> &Context {
        &self.word.ctx
    }

    /// The shared word, for operations that must keep it alive.
    pub(crate) fn shared(&self) -> &Arc<FlagWordAlloc> {
        &self.word
    }
}

impl<W: FlagWord> std::fmt::Debug for FlagCell<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlagCell")
            .field("value", &self.load())
            .field("device", &self.device_address())
            .finish()
    }
}
