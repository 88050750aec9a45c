//! Contexts: the device's primary context, made current before each call.
//!
//! Every owner (stream, event, buffer, module, graph) holds a [`Context`] clone, so the
//! primary context outlives all of them and is released after the last one drops.

use std::sync::Arc;

use crate::cpu::{self, RaceReport};
use crate::cuda::{self, Device};
use crate::error::{Error, Result};
use crate::vocab::attribute::SyncPolicy;

/// The environment variable that forces a backend in [`Context::auto`]: `cuda`, `cpu`, or
/// `cpu-checked` (the CPU backend with the race detector on). `host` and `host-checked`,
/// the names of earlier versions, are accepted too.
pub const BACKEND_ENV: &str = "GPU_PIPELINE_BACKEND";

/// Which backend a [`Context`] executes on.
///
/// ```
/// use gpu_pipeline::{Backend, Context};
/// let ctx = Context::cpu();
/// assert_eq!(ctx.backend(), Backend::Cpu);
/// assert_eq!(ctx.backend().name(), "cpu");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// A CUDA device through the driver API.
    Cuda,
    /// The CPU backend: CPU threads standing in for a device (see the crate docs).
    Cpu,
}

impl Backend {
    /// The CPU backend's name in earlier versions.
    #[doc(hidden)]
    #[allow(non_upper_case_globals)]
    pub const Host: Backend = Backend::Cpu;

    /// `"cuda"` or `"cpu"`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Cpu => "cpu",
        }
    }
}

/// A handle to the execution context every object is created in: a CUDA device's primary
/// context, or the CPU backend. Cloning is cheap, and every object holds a clone, so the
/// context outlives all of them.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Backend, Context};
/// // CUDA device 0 where a driver and a device are found, the CPU backend otherwise.
/// let ctx = Context::auto()?;
/// println!("running on {}", ctx.backend().name());
/// // The CPU backend with its race detector, whatever the machine.
/// let checked = Context::cpu_checked();
/// assert_eq!(checked.backend(), Backend::Cpu);
/// assert!(checked.is_checked());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Context {
    backend: ContextBackend,
}

/// The one backend value a [`Context`] holds.
#[derive(Clone)]
pub(crate) enum ContextBackend {
    /// A retained CUDA primary context.
    Cuda(Arc<cuda::Context>),
    /// A CPU-backend context.
    Cpu(cpu::Context),
}

/// The range of stream priorities a context accepts. CUDA counts priorities downwards:
/// `greatest` is the most urgent and numerically the smallest (e.g. `-5`), `least` the
/// default (`0`).
///
/// ```
/// use gpu_pipeline::StreamPriorityRange;
/// let range = StreamPriorityRange { least: 0, greatest: -5 };
/// assert!(range.contains(-3));
/// assert_eq!(range.clamp(-9), -5);
/// assert_eq!(range.clamp(2), 0);
/// ```
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
        Ok(Context {
            backend: ContextBackend::Cuda(Arc::new(cuda::Context::retain(device)?)),
        })
    }

    /// The primary context of the device with this ordinal.
    pub fn cuda(ordinal: usize) -> Result<Context> {
        Context::new(&Device::get(ordinal)?)
    }

    /// The primary context of `device`, whose host threads wait for the device as `policy`
    /// says (the context's `CU_CTX_SCHED_*` flag): spinning (lowest latency, one busy core
    /// per waiting thread), yielding, or blocking on an OS primitive (no CPU use while
    /// waiting, a few microseconds more latency). It applies to every wait: stream, event and
    /// context synchronizes, and the waits inside `as_slice` and friends.
    ///
    /// The policy is a property of the primary context, which the whole process shares (the
    /// CUDA runtime too): it can be chosen only while the context is inactive, i.e. before
    /// anything in the process uses the device, or after every [`Context`] of it was dropped.
    /// Asking for another policy than the one an active context has is an
    /// [`Error::InvalidArgument`] naming both; asking for the same one just returns the
    /// context. [`Context::new`] and [`Context::cuda`] keep whatever policy is set.
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, Device, SyncPolicy};
    /// let device = Device::get(0)?;
    /// let ctx = Context::new_with_sync_policy(&device, SyncPolicy::BlockingSync)?;
    /// assert_eq!(ctx.sync_policy()?, SyncPolicy::BlockingSync);
    /// // The primary context is active now: another policy is refused.
    /// assert!(Context::new_with_sync_policy(&device, SyncPolicy::Spin).is_err());
    /// # Ok(()) }
    /// ```
    pub fn new_with_sync_policy(device: &Device, policy: SyncPolicy) -> Result<Context> {
        Ok(Context {
            backend: ContextBackend::Cuda(Arc::new(cuda::Context::retain_with(device, policy)?)),
        })
    }

    /// [`Context::new_with_sync_policy`] for the device with this ordinal.
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, SyncPolicy};
    /// // A host thread waiting for this context sleeps instead of spinning.
    /// let ctx = Context::cuda_with_sync_policy(0, SyncPolicy::BlockingSync)?;
    /// ctx.synchronize()?;
    /// # Ok(()) }
    /// ```
    pub fn cuda_with_sync_policy(ordinal: usize, policy: SyncPolicy) -> Result<Context> {
        Context::new_with_sync_policy(&Device::get(ordinal)?, policy)
    }

    /// How host threads waiting for this context are scheduled: on CUDA, the primary
    /// context's `CU_CTX_SCHED_*` flag as the driver reports it; on the CPU backend, the
    /// policy it was created with ([`SyncPolicy::Auto`] unless
    /// [`Context::cpu_with_sync_policy`] says otherwise), which is recorded only: CPU-backend
    /// waits always block.
    ///
    /// ```
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, SyncPolicy};
    /// assert_eq!(Context::cpu().sync_policy()?, SyncPolicy::Auto);
    /// # Ok(()) }
    /// ```
    pub fn sync_policy(&self) -> Result<SyncPolicy> {
        match &self.backend {
            ContextBackend::Cuda(c) => c.sync_policy(),
            ContextBackend::Cpu(c) => Ok(c.sync_policy()),
        }
    }

    /// A CPU-backend context: streams are in-order queues on CPU threads, device memory is
    /// host memory, and kernels run their CPU implementations.
    pub fn cpu() -> Context {
        Context::cpu_with(cpu::ContextOptions { checked: false })
    }

    /// A CPU-backend context in checked mode: every buffer access of every operation is
    /// recorded with vector clocks, and two conflicting accesses that no stream order, event
    /// or synchronize orders are reported as [`Error::Cpu`] races at the next synchronize
    /// (and listed by [`Context::races`]).
    pub fn cpu_checked() -> Context {
        Context::cpu_with(cpu::ContextOptions { checked: true })
    }

    /// `count` simulated devices of the CPU backend (at least one), as
    /// [`Context::cuda`]`(0..count)` would give on a machine with that many GPUs: each
    /// buffer and stream belongs to one device, events order streams across devices, and
    /// [`Stream::copy_peer`](crate::Stream::copy_peer) copies between them. What a
    /// multi-device pipeline runs on in CI.
    ///
    /// ```
    /// use gpu_pipeline::Context;
    /// let devices = Context::cpu_devices(2);
    /// assert_eq!(devices[1].device_index(), 1);
    /// ```
    pub fn cpu_devices(count: usize) -> Vec<Context> {
        Context::cpu_devices_with(cpu::ContextOptions { checked: false }, count)
    }

    /// [`Context::cpu_devices`] in checked mode: one race detector sees every device, so a
    /// race between work on two devices (a kernel reading what a peer copy writes, with no
    /// event between them) is reported like any other.
    pub fn cpu_checked_devices(count: usize) -> Vec<Context> {
        Context::cpu_devices_with(cpu::ContextOptions { checked: true }, count)
    }

    /// [`Context::cpu_checked_devices`] on a simulated topology where the pairs in
    /// `without` (device indices, either order) have no peer access, as two GPUs without
    /// NVLink on different PCIe root complexes: peer copies between them are still staged,
    /// but [`Context::enable_peer_access`] returns `false` and a kernel on one may never take
    /// the other's buffers. What CI uses to test a pipeline's refusal of such a pair.
    ///
    /// ```
    /// use gpu_pipeline::Context;
    /// let devices = Context::cpu_checked_devices_without_peer_access(3, &[(0, 2)]);
    /// assert!(devices[0].can_access_peer(&devices[1]).unwrap());
    /// assert!(!devices[2].can_access_peer(&devices[0]).unwrap());
    /// ```
    pub fn cpu_checked_devices_without_peer_access(
        count: usize,
        without: &[(usize, usize)],
    ) -> Vec<Context> {
        let options = cpu::ContextOptions { checked: true };
        cpu::Context::devices_without_peer_access(options, count, without)
            .into_iter()
            .map(|c| Context {
                backend: ContextBackend::Cpu(c),
            })
            .collect()
    }

    fn cpu_devices_with(options: cpu::ContextOptions, count: usize) -> Vec<Context> {
        cpu::Context::devices(options, count)
            .into_iter()
            .map(|c| Context {
                backend: ContextBackend::Cpu(c),
            })
            .collect()
    }

    /// A CPU-backend context that records `policy` as its scheduling policy, so code written
    /// for [`Context::cuda_with_sync_policy`] runs unchanged on the CPU backend. The policy
    /// has no effect there (waits always block) and [`Context::sync_policy`] reports it.
    ///
    /// ```
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, SyncPolicy};
    /// let ctx = Context::cpu_with_sync_policy(SyncPolicy::Yield);
    /// assert_eq!(ctx.sync_policy()?, SyncPolicy::Yield);
    /// # Ok(()) }
    /// ```
    pub fn cpu_with_sync_policy(policy: SyncPolicy) -> Context {
        Context::cpu().with_cpu_sync_policy(policy)
    }

    /// [`Context::cpu_checked`] recording `policy` (see [`Context::cpu_with_sync_policy`]).
    ///
    /// ```
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, SyncPolicy};
    /// let ctx = Context::cpu_checked_with_sync_policy(SyncPolicy::Spin);
    /// assert!(ctx.is_checked());
    /// assert_eq!(ctx.sync_policy()?, SyncPolicy::Spin);
    /// # Ok(()) }
    /// ```
    pub fn cpu_checked_with_sync_policy(policy: SyncPolicy) -> Context {
        Context::cpu_checked().with_cpu_sync_policy(policy)
    }

    fn with_cpu_sync_policy(self, policy: SyncPolicy) -> Context {
        match self.backend {
            ContextBackend::Cpu(c) => Context {
                backend: ContextBackend::Cpu(c.with_sync_policy(policy)),
            },
            cuda @ ContextBackend::Cuda(_) => Context { backend: cuda },
        }
    }

    /// [`Context::cpu`] under the name of earlier versions.
    #[doc(hidden)]
    pub fn host() -> Context {
        Context::cpu()
    }

    /// [`Context::cpu_checked`] under the name of earlier versions.
    #[doc(hidden)]
    pub fn host_checked() -> Context {
        Context::cpu_checked()
    }

    fn cpu_with(options: cpu::ContextOptions) -> Context {
        Context {
            backend: ContextBackend::Cpu(cpu::Context::new(options)),
        }
    }

    /// The default context: CUDA device 0 when a driver loads and sees a device, the CPU
    /// backend otherwise. [`BACKEND_ENV`] forces one (`cuda`, `cpu`, `cpu-checked`). The
    /// choice is logged as a `tracing` event (target `gpu_pipeline::context`, level `INFO`)
    /// and readable through [`Context::backend`].
    ///
    /// A driver named by [`DRIVER_PATH_ENV`](crate::DRIVER_PATH_ENV) that fails to load is
    /// an error (the loader's message included), not a quiet fall-back to the CPU: whoever
    /// set the variable meant a GPU.
    pub fn auto() -> Result<Context> {
        let forced = std::env::var(BACKEND_ENV).ok();
        let (ctx, why) = match forced.as_deref().map(str::trim) {
            Some("cuda") => (Context::cuda(0)?, format!("{BACKEND_ENV}=cuda")),
            Some(name @ ("cpu" | "host")) => (Context::cpu(), format!("{BACKEND_ENV}={name}")),
            Some(name @ ("cpu-checked" | "host-checked")) => {
                (Context::cpu_checked(), format!("{BACKEND_ENV}={name}"))
            }
            Some("" | "auto") | None => match Device::count() {
                Ok(n) if n > 0 => (
                    Context::cuda(0)?,
                    "a CUDA driver and device were found".to_owned(),
                ),
                Ok(_) => (Context::cpu(), "the CUDA driver sees no device".to_owned()),
                Err(e) if crate::driver::override_path().is_some() => return Err(e),
                Err(e) => (Context::cpu(), format!("no CUDA driver: {e}")),
            },
            Some(other) => {
                return Err(Error::invalid(
                    "Context::auto",
                    format!(
                        "{BACKEND_ENV}={other:?} is not a backend; use `cuda`, `cpu` or `cpu-checked`"
                    ),
                ));
            }
        };
        tracing::info!(backend = ctx.backend().name(), reason = %why, "gpu-pipeline backend chosen");
        Ok(ctx)
    }

    /// Which backend this context runs on.
    pub fn backend(&self) -> Backend {
        match &self.backend {
            ContextBackend::Cuda(_) => Backend::Cuda,
            ContextBackend::Cpu(_) => Backend::Cpu,
        }
    }

    /// The backend value, for the crate's dispatch.
    pub(crate) fn kind(&self) -> &ContextBackend {
        &self.backend
    }

    /// The CUDA context, or the error every CUDA-only operation returns on the CPU backend.
    pub(crate) fn cuda_only(&self, call: &'static str) -> Result<&Arc<cuda::Context>> {
        match &self.backend {
            ContextBackend::Cuda(c) => Ok(c),
            ContextBackend::Cpu(_) => Err(Error::cuda_only(call)),
        }
    }

    /// Whether the race detector is on (CPU backend in checked mode).
    pub fn is_checked(&self) -> bool {
        matches!(&self.backend, ContextBackend::Cpu(c) if c.is_checked())
    }

    /// Every race the checked CPU backend found so far (empty elsewhere).
    pub fn races(&self) -> Vec<RaceReport> {
        match &self.backend {
            ContextBackend::Cpu(c) => c.races(),
            ContextBackend::Cuda(_) => Vec::new(),
        }
    }

    /// How many races the checked CPU backend found beyond the ones it keeps (it keeps at
    /// most 10 000 reports); 0 elsewhere.
    pub fn races_dropped(&self) -> usize {
        match &self.backend {
            ContextBackend::Cpu(c) => c.dropped_races(),
            ContextBackend::Cuda(_) => 0,
        }
    }

    /// The CUDA device, or `None` on the CPU backend.
    pub fn device(&self) -> Option<Device> {
        match &self.backend {
            ContextBackend::Cuda(c) => Some(c.device()),
            ContextBackend::Cpu(_) => None,
        }
    }

    /// The device's index: the CUDA device ordinal, or the simulated device's index among
    /// those [`Context::cpu_devices`] made (0 for [`Context::cpu`]).
    pub fn device_index(&self) -> usize {
        match &self.backend {
            ContextBackend::Cuda(c) => c.device().ordinal(),
            ContextBackend::Cpu(c) => c.device(),
        }
    }

    /// The raw `CUcontext`, for interop; `None` on the CPU backend.
    pub fn handle(&self) -> Option<crate::sys::CUcontext> {
        match &self.backend {
            ContextBackend::Cuda(c) => Some(c.raw()),
            ContextBackend::Cpu(_) => None,
        }
    }

    /// The stream priorities this context accepts.
    pub fn stream_priority_range(&self) -> Result<StreamPriorityRange> {
        let (least, greatest) = match &self.backend {
            ContextBackend::Cuda(c) => c.priority_range()?,
            ContextBackend::Cpu(c) => c.priority_range(),
        };
        Ok(StreamPriorityRange { least, greatest })
    }

    /// `(free, total)` device memory in bytes; `None` on the CPU backend.
    pub fn memory_info(&self) -> Result<Option<(usize, usize)>> {
        match &self.backend {
            ContextBackend::Cuda(c) => Ok(Some(c.memory_info()?)),
            ContextBackend::Cpu(_) => Ok(None),
        }
    }

    /// Blocks until all work in the context has finished.
    pub fn synchronize(&self) -> Result<()> {
        match &self.backend {
            ContextBackend::Cuda(c) => c.synchronize(),
            ContextBackend::Cpu(c) => Ok(c.synchronize()?),
        }
    }

    /// Whether `other` is a handle to this very context (clones of one `Context`).
    pub(crate) fn same_as(&self, other: &Context) -> bool {
        match (&self.backend, &other.backend) {
            (ContextBackend::Cuda(a), ContextBackend::Cuda(b)) => Arc::ptr_eq(a, b),
            (ContextBackend::Cpu(a), ContextBackend::Cpu(b)) => a.same_as(b),
            _ => false,
        }
    }

    /// Whether work of this context may be ordered after events of `other`, and copy peer
    /// to peer with it: any two CUDA contexts of the process (CUDA events work across
    /// devices), or CPU-backend devices made together.
    pub(crate) fn same_machine(&self, other: &Context) -> bool {
        match (&self.backend, &other.backend) {
            (ContextBackend::Cuda(_), ContextBackend::Cuda(_)) => true,
            (ContextBackend::Cpu(a), ContextBackend::Cpu(b)) => a.same_machine(b),
            _ => false,
        }
    }

    /// Whether memory of this context may be used by work of `other`: the same context, or
    /// two handles to the same driver context (`Context::cuda(0)` twice gives the one
    /// primary context).
    #[inline]
    pub(crate) fn shares_memory_with(&self, other: &Context) -> bool {
        match (&self.backend, &other.backend) {
            (ContextBackend::Cuda(a), ContextBackend::Cuda(b)) => a.raw() == b.raw(),
            (ContextBackend::Cpu(a), ContextBackend::Cpu(b)) => a.same_as(b),
            _ => false,
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("Context");
        s.field("backend", &self.backend());
        s.field("device", &self.device_index());
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
