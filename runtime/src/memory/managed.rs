//! Managed (unified) memory: one address that both the host and the device use, migrated by
//! the driver.

use std::marker::PhantomData;
use std::ops::RangeBounds;
use std::sync::Arc;

use bytemuck::Pod;

use super::alloc::DeviceAlloc;
use super::check;
use super::slice::{HostSlice, HostSliceMut};
use super::view::{
    self, DeviceDest, DeviceRegion, DeviceSource, DeviceView, DeviceViewMut, sealed,
};
use crate::context::Context;
use crate::device::DeviceAttribute;
use crate::error::{Error, Result};
use crate::host::Access;
use crate::sys;

/// Which work may touch a managed allocation (`cuStreamAttachMemAsync`'s flags), for
/// [`Stream::attach_mem_async`](crate::Stream::attach_mem_async).
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
/// The host slices are guards ([`HostSlice`], [`HostSliceMut`]): a graph launch, which
/// borrows nothing, refuses to run while one of memory it touches is alive.
///
/// On the host backend the memory is an ordinary heap allocation, and the same rules hold.
///
/// Dropping the buffer synchronizes the context and frees.
pub struct ManagedBuffer<T: Pod> {
    alloc: Arc<DeviceAlloc>,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> ManagedBuffer<T> {
    /// Checks the device supports host access alongside running work.
    fn host_access(ctx: &Context, call: &'static str) -> Result<()> {
        if ctx.host_context().is_some() {
            return Ok(());
        }
        let device = ctx.device().ok_or_else(|| Error::BackendMismatch {
            call,
            backend: ctx.backend().name(),
            reason: "managed memory needs a CUDA device".to_owned(),
        })?;
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

    fn with_init(
        call: &'static str,
        ctx: &Context,
        len: usize,
        init: impl FnOnce(*mut u8, usize),
    ) -> Result<Self> {
        Self::host_access(ctx, call)?;
        let bytes = check::byte_len(call, len, std::mem::size_of::<T>())?;
        let alloc = DeviceAlloc::new_managed(ctx, bytes)?;
        let host = match &alloc.host {
            Some(mem) => mem.ptr().as_ptr(),
            None => std::ptr::with_exposed_provenance_mut::<u8>(alloc.ptr as usize),
        };
        check::host_alignment(call, host as usize, std::mem::align_of::<T>())?;
        init(host, bytes);
        Ok(ManagedBuffer {
            alloc: Arc::new(alloc),
            len,
            _elem: PhantomData,
        })
    }

    /// `len` zeroed elements (written by the host).
    pub fn zeros(ctx: &Context, len: usize) -> Result<Self> {
        Self::with_init("ManagedBuffer::zeros", ctx, len, |ptr, bytes| {
            // SAFETY: a fresh managed allocation of at least `bytes` bytes, host-accessible
            // through its unified address (concurrent managed access was checked); no work
            // has been given the address yet.
            unsafe { std::ptr::write_bytes(ptr, 0, bytes) }
        })
    }

    /// A managed copy of `data` (written by the host).
    pub fn from_slice(ctx: &Context, data: &[T]) -> Result<Self> {
        let src: &[u8] = bytemuck::cast_slice(data);
        Self::with_init(
            "ManagedBuffer::from_slice",
            ctx,
            data.len(),
            |ptr, bytes| {
                debug_assert_eq!(bytes, src.len());
                // SAFETY: as in `zeros`; a fresh allocation cannot overlap `src`.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ptr, bytes) }
            },
        )
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

    /// The unified address of the first element, valid on the host and the device.
    pub fn device_ptr(&self) -> sys::CUdeviceptr {
        self.alloc.ptr
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &Context {
        &self.alloc.ctx
    }

    /// The unified address as a host pointer (the driver hands out managed memory as an
    /// integer address, so its provenance is the exposed one; host-backend memory has its
    /// own pointer).
    fn host_ptr(&self) -> *mut T {
        match &self.alloc.host {
            Some(mem) => mem.ptr().as_ptr().cast(),
            None => std::ptr::with_exposed_provenance_mut(self.alloc.ptr as usize),
        }
    }

    /// Names the buffer in the host backend's race reports and operation labels; no effect
    /// on CUDA.
    pub fn named(self, name: &str) -> Self {
        if let Some(mem) = &self.alloc.host {
            mem.set_name(name);
        }
        self
    }

    /// The elements, after synchronizing the context (all work on every stream of it). While
    /// the guard lives, launching a graph that touches this buffer fails.
    pub fn as_slice(&self) -> Result<HostSlice<'_, T>> {
        self.alloc.begin_host_access(Access::Read)?;
        // SAFETY: `len * size_of::<T>()` initialised bytes (written at creation, later only
        // by device work writing `T`s), aligned for `T` and host-accessible (both checked at
        // creation). No work runs in the context now, none that writes the buffer can be
        // enqueued while this borrow lives (that takes `&mut self`), and a graph launch
        // checks the borrow counted above under the gate that ordered it with the
        // synchronize.
        let slice = unsafe { std::slice::from_raw_parts(self.host_ptr().cast_const(), self.len) };
        Ok(HostSlice::new(slice, &self.alloc.borrows))
    }

    /// The elements, mutably, after synchronizing the context. While the guard lives,
    /// launching a graph that touches this buffer fails.
    pub fn as_mut_slice(&mut self) -> Result<HostSliceMut<'_, T>> {
        self.alloc.begin_host_access(Access::Write)?;
        // SAFETY: as in `as_slice`; `&mut self` keeps any work from being enqueued on the
        // buffer while the slice lives.
        let slice = unsafe { std::slice::from_raw_parts_mut(self.host_ptr(), self.len) };
        Ok(HostSliceMut::new(slice, &self.alloc.borrows))
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

    /// The shared allocation, for crate code that enqueues work on the buffer (see
    /// [`DeviceBuffer`](crate::DeviceBuffer)'s hook of the same name).
    #[allow(dead_code)]
    pub(crate) fn alloc_handle(&self) -> &Arc<DeviceAlloc> {
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
