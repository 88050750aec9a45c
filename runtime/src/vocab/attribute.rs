//! Stream attributes and the synchronization policy, as values: what a user asks a stream
//! or a context for. The CUDA backend encodes them for the driver (`cuda/attribute.rs`); the
//! CPU backend reports the policy it was given.

use crate::sys;

/// Which attribute to read.
///
/// ```
/// use gpu_pipeline::{Backend, Context, Stream, StreamAttribute, StreamAttributeId};
/// let ctx = Context::auto()?; // CUDA device 0 when there is one, else the CPU backend
/// let stream = Stream::new(&ctx)?;
/// match ctx.backend() {
///     Backend::Cuda => {
///         let priority = stream.get_attribute(StreamAttributeId::Priority)?;
///         assert_eq!(priority, StreamAttribute::Priority(stream.priority()?));
///     }
///     // Stream attributes are the driver's: the CPU backend has none.
///     _ => assert!(stream.get_attribute(StreamAttributeId::Priority).is_err()),
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamAttributeId {
    /// The L2 access policy window.
    AccessPolicyWindow,
    /// How a host thread waits for the stream.
    SynchronizationPolicy,
    /// The stream's priority.
    Priority,
}

/// A stream attribute with its value.
///
/// ```
/// use gpu_pipeline::SyncPolicy;
/// use gpu_pipeline::{Backend, Context, Stream, StreamAttribute, StreamAttributeId};
/// let ctx = Context::auto()?; // CUDA device 0 when there is one, else the CPU backend
/// let stream = Stream::new(&ctx)?;
/// let policy = StreamAttribute::SynchronizationPolicy(SyncPolicy::BlockingSync);
/// match ctx.backend() {
///     Backend::Cuda => {
///         stream.set_attribute(policy)?;
///         assert_eq!(stream.get_attribute(StreamAttributeId::SynchronizationPolicy)?, policy);
///     }
///     _ => assert!(stream.set_attribute(policy).is_err()), // CUDA only
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StreamAttribute {
    /// A hint for L2 persistence of an address range.
    AccessPolicyWindow(AccessPolicyWindow),
    /// How a host thread waits for the stream.
    SynchronizationPolicy(SyncPolicy),
    /// The stream's priority (read-only on most drivers; setting it may be rejected).
    Priority(i32),
}

/// An L2 cache access policy over a device address range (`CUaccessPolicyWindow`).
/// It is a cache hint: a stale or wrong range costs performance, never correctness.
///
/// ```
/// use gpu_pipeline::{AccessPolicyWindow, AccessProperty, DeviceBuffer};
/// use gpu_pipeline::{Backend, Context, Stream, StreamAttribute, StreamAttributeId};
/// let ctx = Context::auto()?; // CUDA device 0 when there is one, else the CPU backend
/// let stream = Stream::new(&ctx)?;
/// let table = DeviceBuffer::<f32>::zeros(&stream, 1 << 18)?; // 1 MiB read by every step
/// // `device_ptr` is `None` on the CPU backend, which has no L2 to steer.
/// if let (Backend::Cuda, Some(base)) = (ctx.backend(), table.device_ptr()) {
///     let window = AccessPolicyWindow {
///         base,
///         num_bytes: table.len() * 4,
///         hit_ratio: 1.0,
///         hit_property: AccessProperty::Persisting,
///         miss_property: AccessProperty::Streaming,
///     };
///     stream.set_attribute(StreamAttribute::AccessPolicyWindow(window))?;
///     let StreamAttribute::AccessPolicyWindow(read) =
///         stream.get_attribute(StreamAttributeId::AccessPolicyWindow)?
///     else {
///         unreachable!()
///     };
///     assert_eq!((read.base, read.num_bytes), (base, 1 << 20));
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccessPolicyWindow {
    /// First device address of the window.
    pub base: sys::CUdeviceptr,
    /// Length in bytes (at most the device's `MAX_ACCESS_POLICY_WINDOW_SIZE`).
    pub num_bytes: usize,
    /// Fraction of accesses in the window that get `hit_property`, in `0.0..=1.0`.
    pub hit_ratio: f32,
    /// Property for hits.
    pub hit_property: AccessProperty,
    /// Property for the rest.
    pub miss_property: AccessProperty,
}

/// `CUaccessProperty`.
///
/// ```
/// use gpu_pipeline::{AccessPolicyWindow, AccessProperty, DeviceBuffer};
/// use gpu_pipeline::{Backend, Context, Stream, StreamAttribute, StreamAttributeId};
/// let ctx = Context::auto()?; // CUDA device 0 when there is one, else the CPU backend
/// let stream = Stream::new(&ctx)?;
/// // A field read once per step: its lines should not push reused data out of L2.
/// let field = DeviceBuffer::<f32>::zeros(&stream, 1 << 16)?;
/// if let (Backend::Cuda, Some(base)) = (ctx.backend(), field.device_ptr()) {
///     let window = AccessPolicyWindow {
///         base,
///         num_bytes: field.len() * 4,
///         hit_ratio: 1.0,
///         hit_property: AccessProperty::Streaming,
///         miss_property: AccessProperty::Normal,
///     };
///     stream.set_attribute(StreamAttribute::AccessPolicyWindow(window))?;
///     let read = stream.get_attribute(StreamAttributeId::AccessPolicyWindow)?;
///     assert_eq!(read, StreamAttribute::AccessPolicyWindow(window));
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessProperty {
    /// Normal caching.
    Normal,
    /// Less likely to persist in L2.
    Streaming,
    /// More likely to persist in L2.
    Persisting,
}

/// How a host thread waiting for the device is scheduled: a stream's
/// `CUsynchronizationPolicy` ([`StreamAttribute::SynchronizationPolicy`]), or a whole
/// context's `CU_CTX_SCHED_*` flag
/// ([`Context::cuda_with_sync_policy`](crate::Context::cuda_with_sync_policy)).
///
/// ```
/// use gpu_pipeline::{Context, SyncPolicy};
/// let ctx = Context::cpu_with_sync_policy(SyncPolicy::BlockingSync);
/// assert_eq!(ctx.sync_policy().unwrap(), SyncPolicy::BlockingSync);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncPolicy {
    /// The driver decides.
    Auto,
    /// Spin.
    Spin,
    /// Yield the CPU while waiting.
    Yield,
    /// Block on an OS primitive.
    BlockingSync,
}
