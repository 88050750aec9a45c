//! Managed (unified) memory: one address that both the host and the device use, migrated by
//! the driver.

use std::marker::PhantomData;
use std::ops::RangeBounds;

use bytemuck::Pod;

use super::alloc::{DeviceAlloc, DeviceMemory};
use super::check;
use super::slice::{HostView, HostViewMut};
use super::view::{
    self, DeviceDest, DeviceRegion, DeviceSource, DeviceView, DeviceViewMut, sealed,
};
use crate::context::Context;
use crate::cuda::DeviceAttribute;
use crate::error::{Error, Result};
use crate::sys;

/// Which work may touch a managed allocation (`cuStreamAttachMemAsync`'s flags), for
/// [`Stream::attach_mem_async`](crate::Stream::attach_mem_async).
///
/// ```
/// use gpu_pipeline::{AttachScope, Context, ManagedBuffer, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut counts = ManagedBuffer::<u32>::zeros(&ctx, 4)?;
/// // Only `stream`'s work touches it: other streams' kernels need not see it migrate.
/// stream.attach_mem_async(&counts, AttachScope::Single)?;
/// stream.memset_u32(&mut counts, 3)?;
/// assert_eq!(*counts.as_slice()?, [3; 4]); // the host may always look (it synchronizes)
/// assert_eq!(AttachScope::default(), AttachScope::Global);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttachScope {
    /// Any stream of any device, and the host (`CU_MEM_ATTACH_GLOBAL`, how it is allocated).
    #[default]
    Global,
    /// The host, and (where the device supports concurrent managed access) the device
    /// (`CU_MEM_ATTACH_HOST`).
    Host,
    /// Only the stream it is attached on, and the host (`CU_MEM_ATTACH_SINGLE`).
    Single,
}

impl AttachScope {
    /// The driver flag.
    pub(crate) fn raw(self) -> u32 {
        match self {
            AttachScope::Global => sys::CU_MEM_ATTACH_GLOBAL,
            AttachScope::Host => sys::CU_MEM_ATTACH_HOST,
            AttachScope::Single => sys::CU_MEM_ATTACH_SINGLE,
        }
    }
}

/// `len` elements of `T` in managed memory (`cuMemAllocManaged`, attached globally).
///
/// On the device side it behaves like a [`DeviceBuffer`](crate::DeviceBuffer): copies,
/// memsets and kernels take it (or a view) through the same traits. The host reaches the
/// elements through [`as_slice`](Self::as_slice) and [`as_mut_slice`](Self::as_mut_slice),
/// which first **synchronize the whole context**: managed memory carries no per-stream
/// fences, and any stream may have been handed its address. While a host slice lives, no
/// device work can be enqueued to write the buffer (that takes `&mut`).
///
/// Host access needs a device with concurrent managed access
/// (`CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS`): without it, the host touching managed
/// memory while *any* kernel runs faults, which no borrow can prevent. On such devices the
/// host-side methods return [`Error::Unsupported`].
///
/// The host slices are guards ([`HostView`], [`HostViewMut`]): a graph launch, which
/// borrows nothing, refuses to run while one of memory it touches is alive.
///
/// On the CPU backend the memory is an ordinary heap allocation; the host waits for the work
/// that touches it instead of synchronizing the context.
///
/// Dropping the buffer synchronizes the context and frees.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, ManagedBuffer, Stream};
/// let ctx = Context::cpu(); // on CUDA: a device with concurrent managed access
/// let stream = Stream::non_blocking(&ctx)?;
/// let mut counts = ManagedBuffer::<u32>::zeros(&ctx, 8)?;
/// counts.as_mut_slice()?[3] = 7; // the host writes directly
/// stream.memset_u32(&mut counts.slice_mut(4..)?, 1)?; // the device too
/// assert_eq!(*counts.as_slice()?, [0, 0, 0, 7, 1, 1, 1, 1]); // waits for the memset
/// # Ok(()) }
/// ```
pub struct ManagedBuffer<T: Pod> {
    alloc: DeviceAlloc,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> ManagedBuffer<T> {
    /// Checks the device supports host access alongside running work.
    fn host_access(ctx: &Context, call: &'static str) -> Result<()> {
        let Some(device) = ctx.device() else {
            // The CPU backend: the host reaches every allocation.
            return Ok(());
        };
        if device.attribute(DeviceAttribute::CONCURRENT_MANAGED_ACCESS)? == 0 {
            return Err(Error::Unsupported {
                symbol: call,
                reason: "the device lacks concurrent managed access, so the host cannot touch \
                         managed memory safely while other work may run"
                    .to_owned(),
            });
        }
        Ok(())
    }

    fn new(call: &'static str, ctx: &Context, len: usize) -> Result<Self> {
        Self::host_access(ctx, call)?;
        let bytes = check::byte_len(call, len, std::mem::size_of::<T>())?;
        Ok(ManagedBuffer {
            alloc: DeviceAlloc::new_managed(call, ctx, bytes)?,
            len,
            _elem: PhantomData,
        })
    }

    /// `len` zeroed elements.
    pub fn zeros(ctx: &Context, len: usize) -> Result<Self> {
        Self::new("ManagedBuffer::zeros", ctx, len)
    }

    /// A managed copy of `data` (written by the host).
    pub fn from_slice(ctx: &Context, data: &[T]) -> Result<Self> {
        let mut buffer = Self::new("ManagedBuffer::from_slice", ctx, data.len())?;
        buffer.as_mut_slice()?.copy_from_slice(data);
        Ok(buffer)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The unified address of the first element, valid on the host and the device; `None`
    /// on the CPU backend.
    pub fn device_ptr(&self) -> Option<sys::CUdeviceptr> {
        self.alloc.escaped_ptr()
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &Context {
        &self.alloc.ctx
    }

    /// Names the buffer in the CPU backend's race reports and operation labels; no effect
    /// on CUDA.
    pub fn named(self, name: &str) -> Self {
        self.alloc.name(name);
        self
    }

    /// Names the buffer after the pipeline param it is passed as, in the checked CPU
    /// backend's reports, unless [`named`](Self::named) named it.
    pub(crate) fn name_as_param(&self, name: &str) {
        self.alloc.name_as_param(name);
    }

    /// The elements, after synchronizing the context (all work on every stream of it). While
    /// the guard lives, launching a graph that touches this buffer fails.
    pub fn as_slice(&self) -> Result<HostView<'_, T>> {
        const CALL: &str = "ManagedBuffer::as_slice";
        Ok(match &self.alloc.memory {
            DeviceMemory::Cuda(m) => m.host_slice(CALL, 0, self.len)?.into(),
            DeviceMemory::Cpu(m) => m.host_slice(0, self.len)?.into(),
        })
    }

    /// The elements, mutably, after synchronizing the context. While the guard lives,
    /// launching a graph that touches this buffer fails.
    pub fn as_mut_slice(&mut self) -> Result<HostViewMut<'_, T>> {
        const CALL: &str = "ManagedBuffer::as_mut_slice";
        Ok(match &self.alloc.memory {
            DeviceMemory::Cuda(m) => m.host_slice_mut(CALL, 0, self.len)?.into(),
            DeviceMemory::Cpu(m) => m.host_slice_mut(0, self.len)?.into(),
        })
    }

    /// The elements copied into a `Vec` (synchronizes like [`as_slice`](Self::as_slice)).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.as_slice()?.to_vec())
    }

    /// A shared device-side view of all elements.
    pub fn as_view(&self) -> DeviceView<'_, T> {
        DeviceView::new(&self.alloc, 0, self.len)
    }

    /// An exclusive device-side view of all elements.
    pub fn as_view_mut(&mut self) -> DeviceViewMut<'_, T> {
        DeviceViewMut::new(&self.alloc, 0, self.len)
    }

    /// A shared device-side view of `range`; out of bounds is an error.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
        let (start, len) = check::resolve_range("ManagedBuffer::slice", &range, self.len)?;
        Ok(DeviceView::new(&self.alloc, start, len))
    }

    /// An exclusive device-side view of `range`; out of bounds is an error.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceViewMut<'_, T>> {
        let (start, len) = check::resolve_range("ManagedBuffer::slice_mut", &range, self.len)?;
        Ok(DeviceViewMut::new(&self.alloc, start, len))
    }

    /// The allocation, for crate code that enqueues work on the buffer.
    pub(crate) fn alloc(&self) -> &DeviceAlloc {
        &self.alloc
    }
}

impl<T: Pod> sealed::DeviceMemory for ManagedBuffer<T> {
    fn device_region(&self) -> DeviceRegion<'_> {
        view::whole_device::<T>(&self.alloc, self.len)
    }
}
impl<T: Pod> DeviceSource<T> for ManagedBuffer<T> {}
impl<T: Pod> DeviceDest<T> for ManagedBuffer<T> {}

impl<T: Pod> std::fmt::Debug for ManagedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedBuffer")
            .field("len", &self.len)
            .field("alloc", &self.alloc)
            .finish()
    }
}
