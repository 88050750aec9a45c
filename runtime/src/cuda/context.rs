//! The device's primary context, retained once per [`Context`] and made current before each
//! driver call.

use std::cell::Cell;
use std::sync::Mutex;

use crate::driver::{Driver, check, driver};
use crate::error::{DriverError, Error, Result};
use crate::sys::{self, CUresult, CUstreamCaptureMode};

use super::device::Device;
use super::slab::{FlagPages, Slab, WordPages};
use crate::vocab::attribute::SyncPolicy;

impl SyncPolicy {
    /// The context scheduling flag (`CU_CTX_SCHED_*`) of this policy.
    fn ctx_flag(self) -> std::ffi::c_uint {
        match self {
            SyncPolicy::Auto => sys::CU_CTX_SCHED_AUTO,
            SyncPolicy::Spin => sys::CU_CTX_SCHED_SPIN,
            SyncPolicy::Yield => sys::CU_CTX_SCHED_YIELD,
            SyncPolicy::BlockingSync => sys::CU_CTX_SCHED_BLOCKING_SYNC,
        }
    }

    /// The policy of a context's flags; `None` for a scheduling value CUDA does not define.
    fn from_ctx_flags(flags: std::ffi::c_uint) -> Option<SyncPolicy> {
        [
            SyncPolicy::Auto,
            SyncPolicy::Spin,
            SyncPolicy::Yield,
            SyncPolicy::BlockingSync,
        ]
        .into_iter()
        .find(|p| p.ctx_flag() == flags & sys::CU_CTX_SCHED_MASK)
    }
}

/// `(flags, active)` of `device`'s primary context.
fn primary_state(d: &Driver, device: &Device) -> Result<(std::ffi::c_uint, bool)> {
    let (mut flags, mut active) = (0, 0);
    // SAFETY: valid out-pointers and a valid device handle (Device's invariant).
    check("cuDevicePrimaryCtxGetState", unsafe {
        (d.cuDevicePrimaryCtxGetState)(device.handle(), &mut flags, &mut active)
    })?;
    Ok((flags, active != 0))
}

fn policy_of(call: &'static str, flags: std::ffi::c_uint) -> Result<SyncPolicy> {
    SyncPolicy::from_ctx_flags(flags).ok_or_else(|| {
        Error::invalid(
            call,
            format!(
                "the context's scheduling flags {:#x} are none of CUDA's",
                flags & sys::CU_CTX_SCHED_MASK
            ),
        )
    })
}

/// The error of asking for `wanted` when the primary context is already active with
/// `current`.
fn already_active(
    call: &'static str,
    device: &Device,
    current: SyncPolicy,
    wanted: SyncPolicy,
) -> Error {
    Error::invalid(
        call,
        format!(
            "the primary context of device {} is already active with `SyncPolicy::{current:?}`, \
             and a context's scheduling cannot change once it is active; ask for \
             `SyncPolicy::{wanted:?}` before anything else in the process uses the device (the \
             first `Context` of it, or the CUDA runtime), or drop every `Context` of the device \
             first, or use `SyncPolicy::{current:?}`",
            device.ordinal()
        ),
    )
}

thread_local! {
    /// Set while a host function this crate enqueued runs on the calling thread (the driver's
    /// callback thread).
    static IN_HOST_FUNCTION: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread runs a host function of this crate now.
#[inline]
pub(crate) fn in_host_function() -> bool {
    IN_HOST_FUNCTION.with(Cell::get)
}

/// Marks the calling thread as running a host function until dropped (see
/// [`Context::bind`]). Scopes nest: the flag is restored to what it was.
pub(crate) struct HostFnScope {
    outer: bool,
}

impl HostFnScope {
    /// Enters a host function.
    pub(crate) fn enter() -> HostFnScope {
        HostFnScope {
            outer: IN_HOST_FUNCTION.with(|flag| flag.replace(true)),
        }
    }
}

impl Drop for HostFnScope {
    fn drop(&mut self) {
        IN_HOST_FUNCTION.with(|flag| flag.set(self.outer));
    }
}

#[cold]
fn host_function_error() -> crate::Error {
    DriverError {
        call: "cuCtxSetCurrent",
        code: CUresult::CUDA_ERROR_NOT_PERMITTED,
        name: "CUDA_ERROR_NOT_PERMITTED".to_owned(),
        description: "CUDA calls are not permitted inside a host function (`launch_host_func`, \
                      `launch_host_fn`, `add_callback`): gpu-pipeline refuses them there, and \
                      what a drop there would free is leaked instead"
            .to_owned(),
    }
    .into()
}

/// The (from, to) pairs of raw contexts whose peer access this process enabled: the driver
/// cannot be asked, and a kernel's buffers of another device are checked against it.
static ENABLED_PEERS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// A retained primary context.
///
/// Invariant: `raw` is the primary context of `device`, retained by `cuDevicePrimaryCtxRetain`
/// in [`Context::retain`] and released once, in `Drop`; every other CUDA object of the crate
/// holds an `Arc` of its `Context`, so the context outlives them all.
pub(crate) struct Context {
    device: Device,
    raw: sys::CUcontext,
    driver: &'static Driver,
    /// The device-mapped host words this context's flag words use.
    flags: Slab<FlagPages>,
    /// The device slots graphs' condition words and loop counters use.
    words: Slab<WordPages>,
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
            flags: Slab::default(),
            words: Slab::default(),
        })
    }

    /// Retains the primary context of `device`, which schedules host threads that wait for
    /// it as `policy` says. The policy is set while the primary context is inactive; once it
    /// is active (this process already uses the device) its flags cannot change, so asking
    /// for another policy than the active one is an error, never silently ignored.
    pub(crate) fn retain_with(device: &Device, policy: SyncPolicy) -> Result<Context> {
        const CALL: &str = "Context::new_with_sync_policy";
        let d = driver()?;
        let (flags, active) = primary_state(d, device)?;
        if let Some(current) = SyncPolicy::from_ctx_flags(flags).filter(|_| active)
            && current != policy
        {
            return Err(already_active(CALL, device, current, policy));
        }
        if !active && flags & sys::CU_CTX_SCHED_MASK != policy.ctx_flag() {
            let flags = (flags & !sys::CU_CTX_SCHED_MASK) | policy.ctx_flag();
            // SAFETY: a valid device handle (Device's invariant) and flags CUDA defines (the
            // other bits are the ones the driver reported).
            check("cuDevicePrimaryCtxSetFlags", unsafe {
                (d.cuDevicePrimaryCtxSetFlags)(device.handle(), flags)
            })?;
        }
        let ctx = Context::retain(device)?;
        // Another thread may have activated the context between the check and the retain:
        // the flags of the context now current say what it really does.
        let current = ctx.sync_policy()?;
        if current != policy {
            return Err(already_active(CALL, device, current, policy));
        }
        Ok(ctx)
    }

    /// How host threads waiting for this context are scheduled (its `CU_CTX_SCHED_*` flags).
    pub(crate) fn sync_policy(&self) -> Result<SyncPolicy> {
        let d = self.bind()?;
        let mut flags = 0;
        // SAFETY: a valid out-pointer; the context is current.
        check("cuCtxGetFlags", unsafe { (d.cuCtxGetFlags)(&mut flags) })?;
        policy_of("Context::sync_policy", flags)
    }

    /// Makes the context current on the calling thread. Cheap: the driver keeps a per-thread
    /// current pointer, which is read first and replaced only when it is another context
    /// (reading it costs the driver less than setting it, and every call of the crate binds).
    ///
    /// Refused inside a host function this crate enqueued ([`HostFnScope`]): CUDA forbids
    /// driver calls there, and a synchronize there (what dropping memory does) may wait for
    /// the very host function that makes it. So every driver call of the crate fails there
    /// instead, and a drop that cannot wait leaks what it would have freed.
    #[inline]
    pub(crate) fn bind(&self) -> Result<&'static Driver> {
        if in_host_function() {
            return Err(host_function_error());
        }
        let mut current = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        check("cuCtxGetCurrent", unsafe {
            (self.driver.cuCtxGetCurrent)(&mut current)
        })?;
        if current != self.raw {
            // SAFETY: `raw` is a retained primary context (the type's invariant).
            check("cuCtxSetCurrent", unsafe {
                (self.driver.cuCtxSetCurrent)(self.raw)
            })?;
        }
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

    /// Where this context's flag words come from.
    pub(crate) fn flag_slab(&self) -> &Slab<FlagPages> {
        &self.flags
    }

    /// Where graphs' small device words of this context come from.
    pub(crate) fn word_slab(&self) -> &Slab<WordPages> {
        &self.words
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
        let enabled = match unsafe { f(peer.raw, 0) } {
            sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => true,
            // No direct path, or the device's peer table is full (8 peers on most GPUs):
            // copies are staged instead.
            sys::CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
            | sys::CUresult::CUDA_ERROR_TOO_MANY_PEERS => false,
            code => check("cuCtxEnablePeerAccess", code).map(|()| true)?,
        };
        if enabled {
            let mut pairs = ENABLED_PEERS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let pair = (self.raw as usize, peer.raw as usize);
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
        Ok(enabled)
    }

    /// Whether this context's work may address `peer`'s memory: the same context, or peer
    /// access enabled through [`Context::enable_peer_access`] (primary contexts live as long
    /// as the process holds them, so a pair once enabled stays enabled).
    pub(crate) fn peer_access_enabled(&self, peer: &Context) -> bool {
        self.raw == peer.raw
            || ENABLED_PEERS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(&(self.raw as usize, peer.raw as usize))
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
        if in_host_function() {
            // Releasing the last reference destroys the context, which waits for its work:
            // the host function running now included. Kept retained instead.
            tracing::warn!(
                "a CUDA context's last handle was dropped inside a host function; it stays retained"
            );
            return;
        }
        // Every flag word and graph word holds this context, so none is held any more; their
        // work finished before each was handed back (a slab with one never handed back, whose
        // work may still run, leaks its pages).
        if let Ok(d) = self.bind() {
            self.flags.release(d);
            self.words.release(d);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduling_flags_map_both_ways_and_ignore_the_other_bits() {
        for policy in [
            SyncPolicy::Auto,
            SyncPolicy::Spin,
            SyncPolicy::Yield,
            SyncPolicy::BlockingSync,
        ] {
            assert_eq!(SyncPolicy::from_ctx_flags(policy.ctx_flag()), Some(policy));
            // CU_CTX_MAP_HOST (0x8) and CU_CTX_LMEM_RESIZE_TO_MAX (0x10) are not scheduling.
            let other_bits = policy.ctx_flag() | 0x8 | 0x10;
            assert_eq!(SyncPolicy::from_ctx_flags(other_bits), Some(policy));
        }
        assert_eq!(SyncPolicy::Spin.ctx_flag(), 0x1);
        assert_eq!(SyncPolicy::Yield.ctx_flag(), 0x2);
        assert_eq!(SyncPolicy::BlockingSync.ctx_flag(), 0x4);
        // Two scheduling bits at once is no policy.
        assert_eq!(SyncPolicy::from_ctx_flags(0x3), None);
        let err = policy_of("Context::sync_policy", 0x6).unwrap_err();
        assert!(err.to_string().contains("0x6"), "{err}");
    }
}
