//! The device's primary context, retained once per [`Context`] and made current before each
//! driver call.

use crate::driver::{Driver, check, driver};
use crate::error::Result;
use crate::sys::{self, CUstreamCaptureMode};

use super::device::Device;

/// A retained primary context.
///
/// Invariant: `raw` is the primary context of `device`, retained by `cuDevicePrimaryCtxRetain`
/// in [`Context::retain`] and released once, in `Drop`; every other CUDA object of the crate
/// holds an `Arc` of its `Context`, so the context outlives them all.
pub(crate) struct Context {
    device: Device,
    raw: sys::CUcontext,
    driver: &'static Driver,
}

// SAFETY: a CUcontext is a process-wide handle the driver lets any thread make current; the
// primary context is reference-counted by the driver and released once, in Drop.
unsafe impl Send for Context {}
// SAFETY: as above; nothing is mutated through the handle from Rust.
unsafe impl Sync for Context {}

impl Context {
    /// Retains the primary context of `device`.
    pub(crate) fn retain(device: &Device) -> Result<Context> {
        let d = driver()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and device handle (Device's invariant); released in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe {
            (d.cuDevicePrimaryCtxRetain)(&mut raw, device.handle())
        })?;
        Ok(Context {
            device: *device,
            raw,
            driver: d,
        })
    }

    /// Makes the context current on the calling thread. Cheap: the driver keeps a per-thread
    /// current pointer.
    #[inline]
    pub(crate) fn bind(&self) -> Result<&'static Driver> {
        // SAFETY: `raw` is a retained primary context (the type's invariant).
        check("cuCtxSetCurrent", unsafe {
            (self.driver.cuCtxSetCurrent)(self.raw)
        })?;
        Ok(self.driver)
    }

    /// The device.
    pub(crate) fn device(&self) -> Device {
        self.device
    }

    /// The raw handle, for interop and for telling contexts apart.
    pub(crate) fn raw(&self) -> sys::CUcontext {
        self.raw
    }

    /// `(least, greatest)` stream priority.
    pub(crate) fn priority_range(&self) -> Result<(i32, i32)> {
        let d = self.bind()?;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: valid out-pointers; the context is current.
        check("cuCtxGetStreamPriorityRange", unsafe {
            (d.cuCtxGetStreamPriorityRange)(&mut least, &mut greatest)
        })?;
        Ok((least, greatest))
    }

    /// `(free, total)` device memory in bytes.
    pub(crate) fn memory_info(&self) -> Result<(usize, usize)> {
        let d = self.bind()?;
        let (mut free, mut total) = (0, 0);
        // SAFETY: valid out-pointers; the context is current.
        check("cuMemGetInfo", unsafe {
            (d.cuMemGetInfo)(&mut free, &mut total)
        })?;
        Ok((free, total))
    }

    /// Blocks until all work in the context has finished.
    pub(crate) fn synchronize(&self) -> Result<()> {
        let d = self.bind()?;
        // SAFETY: no arguments; the context is current.
        check("cuCtxSynchronize", unsafe { (d.cuCtxSynchronize)() })
    }

    /// Whether this context's device can address `peer`'s memory directly
    /// (`cuDeviceCanAccessPeer`: NVLink or a PCIe path the platform allows).
    pub(crate) fn can_access_peer(&self, peer: &Context) -> Result<bool> {
        if self.device.handle() == peer.device.handle() {
            return Ok(true);
        }
        let d = self.bind()?;
        let f = d.optional(d.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer")?;
        let mut can = 0;
        // SAFETY: a valid out-pointer and two valid device handles (Device's invariant).
        check("cuDeviceCanAccessPeer", unsafe {
            f(&mut can, self.device.handle(), peer.device.handle())
        })?;
        Ok(can != 0)
    }

    /// Lets this context's work address `peer`'s memory directly (`cuCtxEnablePeerAccess`),
    /// where the topology allows it: `Ok(true)` once enabled (now or earlier), `Ok(false)`
    /// where it cannot be (peer copies are then staged by the driver).
    pub(crate) fn enable_peer_access(&self, peer: &Context) -> Result<bool> {
        if self.raw == peer.raw || !self.can_access_peer(peer)? {
            return Ok(self.raw == peer.raw);
        }
        let d = self.bind()?;
        let f = d.optional(d.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess")?;
        // SAFETY: `peer.raw` is a retained primary context (its invariant); flags must be 0;
        // this context is current.
        match unsafe { f(peer.raw, 0) } {
            sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(true),
            // No direct path, or the device's peer table is full (8 peers on most GPUs):
            // copies are staged instead.
            sys::CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
            | sys::CUresult::CUDA_ERROR_TOO_MANY_PEERS => Ok(false),
            code => check("cuCtxEnablePeerAccess", code).map(|()| true),
        }
    }

    /// Exchanges the calling thread's capture mode and returns the previous one.
    pub(crate) fn exchange_capture_mode(
        &self,
        mode: CUstreamCaptureMode,
    ) -> Result<CUstreamCaptureMode> {
        let d = self.bind()?;
        let mut raw = mode;
        // SAFETY: a valid in/out pointer.
        check("cuThreadExchangeStreamCaptureMode", unsafe {
            (d.cuThreadExchangeStreamCaptureMode)(&mut raw)
        })?;
        Ok(raw)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `Context::retain`; the device handle is valid.
        let code = unsafe { (self.driver.cuDevicePrimaryCtxRelease)(self.device.handle()) };
        if !code.is_success() {
            tracing::warn!(
                ?code,
                "cuDevicePrimaryCtxRelease failed while dropping a context"
            );
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Context")
            .field("device", &self.device.ordinal())
            .finish()
    }
}
