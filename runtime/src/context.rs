//! Contexts: the device's primary context, made current before each call.
//!
//! Every owner (stream, event, buffer, module, graph) holds a [`Context`] clone, so the
//! primary context outlives all of them and is released after the last one drops.

use std::sync::Arc;

use crate::device::Device;
use crate::driver::check;
use crate::driver::{Driver, driver};
use crate::error::{Error, Result};
use crate::host::{HostContext, HostContextOptions, RaceReport};
use crate::sys;

/// The environment variable that forces a backend in [`Context::auto`]: `cuda`, `host`, or
/// `host-checked` (the host backend with the race detector on).
pub const BACKEND_ENV: &str = "GPU_PIPELINE_BACKEND";

/// Which backend a [`Context`] executes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// A CUDA device through the driver API.
    Cuda,
    /// CPU threads standing in for a device (see the crate docs).
    Host,
}

impl Backend {
    /// `"cuda"` or `"host"`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Host => "host",
        }
    }
}

/// A handle to the execution context every object is created in. Cloning is cheap.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

pub(crate) struct ContextInner {
    pub(crate) backend: BackendContext,
}

pub(crate) enum BackendContext {
    Cuda(CudaContext),
    Host(HostContext),
}

pub(crate) struct CudaContext {
    pub(crate) device: Device,
    pub(crate) raw: sys::CUcontext,
    pub(crate) driver: &'static Driver,
}

// SAFETY: a CUcontext is a process-wide handle the driver lets any thread make current;
// the primary context is reference-counted by the driver and released once, in Drop.
unsafe impl Send for CudaContext {}
// SAFETY: as above; we never mutate through the handle from Rust.
unsafe impl Sync for CudaContext {}

/// The range of stream priorities a context accepts. CUDA counts priorities downwards:
/// `greatest` is the most urgent and numerically the smallest (e.g. `-5`), `least` the
/// default (`0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamPriorityRange {
    /// The lowest priority, which is also the default (numerically the largest).
    pub least: i32,
    /// The highest priority (numerically the smallest).
    pub greatest: i32,
}

impl StreamPriorityRange {
    /// Clamps `priority` into the range, as `cuStreamCreateWithPriority` does.
    pub fn clamp(&self, priority: i32) -> i32 {
        priority.clamp(self.greatest, self.least)
    }

    /// Whether `priority` lies in the range.
    pub fn contains(&self, priority: i32) -> bool {
        (self.greatest..=self.least).contains(&priority)
    }
}

impl Context {
    /// The primary context of `device`.
    pub fn new(device: &Device) -> Result<Context> {
        let d = driver()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and device handle; released in CudaContext::drop.
        check("cuDevicePrimaryCtxRetain", unsafe {
            (d.cuDevicePrimaryCtxRetain)(&mut raw, device.handle())
        })?;
        let cuda = CudaContext {
            device: *device,
            raw,
            driver: d,
        };
        Ok(Context {
            inner: Arc::new(ContextInner {
                backend: BackendContext::Cuda(cuda),
            }),
        })
    }

    /// The primary context of the device with this ordinal.
    pub fn cuda(ordinal: usize) -> Result<Context> {
        Context::new(&Device::get(ordinal)?)
    }

    /// A host-backend context: streams are in-order queues on CPU threads, device memory is
    /// host memory, and kernels run their host implementations.
    pub fn host() -> Context {
        Context::host_with(HostContextOptions { checked: false })
    }

    /// A host-backend context in checked mode: every buffer access of every operation is
    /// recorded with vector clocks, and two conflicting accesses that no stream order, event
    /// or synchronize orders are reported as [`Error::Host`] races at the next synchronize
    /// (and listed by [`Context::races`]).
    pub fn host_checked() -> Context {
        Context::host_with(HostContextOptions { checked: true })
    }

    fn host_with(options: HostContextOptions) -> Context {
        let host = HostContext::new(options);
        Context {
            inner: Arc::new(ContextInner {
                backend: BackendContext::Host(host),
            }),
        }
    }

    /// The default context: CUDA device 0 when a driver loads and sees a device, the host
    /// backend otherwise. [`BACKEND_ENV`] forces one (`cuda`, `host`, `host-checked`). The
    /// choice is logged as a `tracing` event and readable through [`Context::backend`].
    pub fn auto() -> Result<Context> {
        let forced = std::env::var(BACKEND_ENV).ok();
        let (ctx, why) = match forced.as_deref().map(str::trim) {
            Some("cuda") => (Context::cuda(0)?, format!("{BACKEND_ENV}=cuda")),
            Some("host") => (Context::host(), format!("{BACKEND_ENV}=host")),
            Some("host-checked") => (
                Context::host_checked(),
                format!("{BACKEND_ENV}=host-checked"),
            ),
            Some("" | "auto") | None => match Device::count() {
                Ok(n) if n > 0 => (
                    Context::cuda(0)?,
                    "a CUDA driver and device were found".to_owned(),
                ),
                Ok(_) => (Context::host(), "the CUDA driver sees no device".to_owned()),
                Err(e) => (Context::host(), format!("no CUDA driver: {e}")),
            },
            Some(other) => {
                return Err(Error::invalid(
                    "Context::auto",
                    format!(
                        "{BACKEND_ENV}={other:?} is not a backend; use `cuda`, `host` or `host-checked`"
                    ),
                ));
            }
        };
        tracing::info!(backend = ctx.backend().name(), reason = %why, "gpu-pipeline backend chosen");
        Ok(ctx)
    }

    /// Which backend this context runs on.
    pub fn backend(&self) -> Backend {
        match &self.inner.backend {
            BackendContext::Cuda(_) => Backend::Cuda,
            BackendContext::Host(_) => Backend::Host,
        }
    }

    /// Whether the race detector is on (host backend in checked mode).
    pub fn is_checked(&self) -> bool {
        matches!(&self.inner.backend, BackendContext::Host(h) if h.is_checked())
    }

    /// Every race the checked host backend found so far (empty elsewhere).
    pub fn races(&self) -> Vec<RaceReport> {
        match &self.inner.backend {
            BackendContext::Host(h) => h.races(),
            BackendContext::Cuda(_) => Vec::new(),
        }
    }

    /// How many races the checked host backend found beyond the ones it keeps (it keeps at
    /// most 10 000 reports); 0 elsewhere.
    pub fn races_dropped(&self) -> usize {
        match &self.inner.backend {
            BackendContext::Host(h) => h.dropped_races(),
            BackendContext::Cuda(_) => 0,
        }
    }

    /// The CUDA device, or `None` on the host backend.
    pub fn device(&self) -> Option<Device> {
        match &self.inner.backend {
            BackendContext::Cuda(c) => Some(c.device),
            BackendContext::Host(_) => None,
        }
    }

    /// The raw `CUcontext`, for interop; `None` on the host backend.
    pub fn handle(&self) -> Option<sys::CUcontext> {
        match &self.inner.backend {
            BackendContext::Cuda(c) => Some(c.raw),
            BackendContext::Host(_) => None,
        }
    }

    /// The host side of this context, on the host backend.
    pub(crate) fn host_context(&self) -> Option<&HostContext> {
        match &self.inner.backend {
            BackendContext::Host(h) => Some(h),
            BackendContext::Cuda(_) => None,
        }
    }

    /// The stream priorities this context accepts.
    pub fn stream_priority_range(&self) -> Result<StreamPriorityRange> {
        match &self.inner.backend {
            BackendContext::Cuda(c) => {
                c.bind()?;
                let (mut least, mut greatest) = (0, 0);
                // SAFETY: valid out-pointers; the context is current.
                check("cuCtxGetStreamPriorityRange", unsafe {
                    (c.driver.cuCtxGetStreamPriorityRange)(&mut least, &mut greatest)
                })?;
                Ok(StreamPriorityRange { least, greatest })
            }
            BackendContext::Host(h) => {
                let (least, greatest) = h.priority_range();
                Ok(StreamPriorityRange { least, greatest })
            }
        }
    }

    /// `(free, total)` device memory in bytes; `None` on the host backend.
    pub fn memory_info(&self) -> Result<Option<(usize, usize)>> {
        match &self.inner.backend {
            BackendContext::Cuda(c) => {
                c.bind()?;
                let (mut free, mut total) = (0, 0);
                // SAFETY: valid out-pointers; the context is current.
                check("cuMemGetInfo", unsafe {
                    (c.driver.cuMemGetInfo)(&mut free, &mut total)
                })?;
                Ok(Some((free, total)))
            }
            BackendContext::Host(_) => Ok(None),
        }
    }

    /// Blocks until all work in the context has finished.
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner.backend {
            BackendContext::Cuda(c) => {
                c.bind()?;
                // SAFETY: no arguments; the context is current.
                check("cuCtxSynchronize", unsafe { (c.driver.cuCtxSynchronize)() })
            }
            BackendContext::Host(h) => Ok(h.synchronize()?),
        }
    }

    /// The CUDA side of this context, made current on the calling thread.
    pub(crate) fn bound_cuda(&self, call: &'static str) -> Result<&CudaContext> {
        match &self.inner.backend {
            BackendContext::Cuda(c) => {
                c.bind()?;
                Ok(c)
            }
            BackendContext::Host(_) => Err(Error::BackendMismatch {
                call,
                backend: self.backend().name(),
                reason: "it needs a CUDA context".to_owned(),
            }),
        }
    }

    pub(crate) fn same_as(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl CudaContext {
    /// Makes this context current on the calling thread. Cheap: the driver keeps a
    /// per-thread current pointer.
    #[inline]
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: `raw` is a retained primary context, valid until Drop.
        check("cuCtxSetCurrent", unsafe {
            (self.driver.cuCtxSetCurrent)(self.raw)
        })
    }
}

impl Drop for CudaContext {
    fn drop(&mut self) {
        // SAFETY: balances the retain in Context::new; the device handle is valid.
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
        let mut s = f.debug_struct("Context");
        s.field("backend", &self.backend());
        if let Some(device) = self.device() {
            s.field("device", &device.ordinal());
        }
        s.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_range_clamps_like_the_driver() {
        let r = StreamPriorityRange {
            least: 0,
            greatest: -5,
        };
        assert_eq!(r.clamp(-100), -5);
        assert_eq!(r.clamp(7), 0);
        assert_eq!(r.clamp(-3), -3);
        assert!(r.contains(-5) && r.contains(0) && !r.contains(1) && !r.contains(-6));
    }
}
