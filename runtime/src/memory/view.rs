//! Views (sub-ranges) of buffers, and the traits through which copies, memsets and kernel
//! launches accept whole buffers and views alike.
//!
//! A view borrows its buffer: [`DeviceView`] / [`PinnedView`] like `&[T]`, [`DeviceViewMut`] /
//! [`PinnedViewMut`] like `&mut [T]`. Work that writes takes `&mut` of a destination for the
//! length of the enqueue call, so the borrow checker keeps host slices of pinned memory and
//! device writes apart; the fences in the allocation cover the time after the call.
//!
//! The traits are sealed: their one method hands out the region (allocation, offset, length)
//! the work will touch, and a foreign implementation could lie about it.

use std::marker::PhantomData;
use std::ops::RangeBounds;

use bytemuck::Pod;

use super::alloc::{DeviceAlloc, DeviceMemory, PinnedAlloc, PinnedMemory};
use super::check;
use crate::cpu;
use crate::cuda;
use crate::error::Result;
use crate::sys;

pub(crate) mod sealed {
    /// Gives the device memory a buffer or view covers. Sealed: see the module docs.
    pub trait DeviceMemory {
        /// The region, for the crate's copies and launches.
        fn device_region(&self) -> super::DeviceRegion<'_>;
    }

    /// Gives the pinned host memory a buffer or view covers. Sealed: see the module docs.
    pub trait PinnedMemory {
        /// The region, for the crate's copies.
        fn pinned_region(&self) -> super::PinnedRegion<'_>;
    }
}

/// Device memory that work may read: a [`DeviceBuffer`](crate::DeviceBuffer),
/// [`ManagedBuffer`](crate::ManagedBuffer), [`DeviceView`] or [`DeviceViewMut`] of `T`.
///
/// Write a function over any of them once:
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, DeviceSource, ManagedBuffer, PinnedBuffer, Stream};
/// /// Copies the first element of `src` back to the host.
/// fn first(stream: &Stream, src: &impl DeviceSource<u32>) -> gpu_pipeline::Result<u32> {
///     let mut out = PinnedBuffer::<u32>::zeros(stream.context(), 1)?;
///     stream.copy_dtoh(src, &mut out)?;
///     Ok(out.as_slice()?[0])
/// }
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let buffer = DeviceBuffer::from_slice(&stream, &[4u32, 5, 6])?;
/// assert_eq!(first(&stream, &buffer.slice(1..2)?)?, 5); // a view
/// let managed = ManagedBuffer::from_slice(&ctx, &[9u32])?;
/// assert_eq!(first(&stream, &managed)?, 9);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub trait DeviceSource<T: Pod>: sealed::DeviceMemory {}

/// Device memory that work may write: a [`DeviceBuffer`](crate::DeviceBuffer),
/// [`ManagedBuffer`](crate::ManagedBuffer) or [`DeviceViewMut`] of `T`, taken by `&mut`.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, DeviceDest, Stream};
/// /// Sets every element to `value` (any 4-byte element type).
/// fn clear<T: gpu_pipeline::Pod>(
///     stream: &Stream,
///     dst: &mut impl DeviceDest<T>,
///     value: u32,
/// ) -> gpu_pipeline::Result<()> {
///     stream.memset_u32(dst, value)
/// }
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut x = DeviceBuffer::<f32>::zeros(&stream, 6)?;
/// clear(&stream, &mut x.slice_mut(2..4)?, 1.0f32.to_bits())?; // a mutable view
/// assert_eq!(x.to_vec(&stream)?, [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
///
/// A shared view is read-only:
///
/// ```compile_fail
/// use gpu_pipeline::{DeviceDest, DeviceView};
/// fn writable<D: DeviceDest<f32>>() {}
/// writable::<DeviceView<'static, f32>>();
/// ```
pub trait DeviceDest<T: Pod>: DeviceSource<T> {}

/// Pinned host memory a copy may read: a [`PinnedBuffer`](crate::PinnedBuffer),
/// [`PinnedView`] or [`PinnedViewMut`] of `T`.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, PinnedSource, Stream};
/// /// Uploads `src` into `dst` (same lengths).
/// fn upload(
///     stream: &Stream,
///     src: &impl PinnedSource<f32>,
///     dst: &mut DeviceBuffer<f32>,
/// ) -> gpu_pipeline::Result<()> {
///     stream.copy_htod(src, dst)
/// }
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let staging = PinnedBuffer::from_slice(&ctx, &[1.0f32, 2.0, 3.0, 4.0])?;
/// let mut x = DeviceBuffer::<f32>::zeros(&stream, 2)?;
/// upload(&stream, &staging.slice(2..)?, &mut x)?; // the last two, as a view
/// assert_eq!(x.to_vec(&stream)?, [3.0, 4.0]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub trait PinnedSource<T: Pod>: sealed::PinnedMemory {}

/// Pinned host memory a copy may write: a [`PinnedBuffer`](crate::PinnedBuffer) or
/// [`PinnedViewMut`] of `T`, taken by `&mut`.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, PinnedDest, Stream};
/// /// Downloads `src` into `dst` (same lengths).
/// fn download(
///     stream: &Stream,
///     src: &DeviceBuffer<u8>,
///     dst: &mut impl PinnedDest<u8>,
/// ) -> gpu_pipeline::Result<()> {
///     stream.copy_dtoh(src, dst)
/// }
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let x = DeviceBuffer::from_slice(&stream, &[7u8, 8])?;
/// let mut out = PinnedBuffer::<u8>::zeros(&ctx, 4)?;
/// download(&stream, &x, &mut out.slice_mut(1..3)?)?;
/// assert_eq!(*out.as_slice()?, [0, 7, 8, 0]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub trait PinnedDest<T: Pod>: PinnedSource<T> {}

/// The device memory one buffer or view covers: the allocation, the byte offset into it, and
/// the length. What copies and kernel launches bake into work.
#[derive(Clone, Copy, Debug)]
pub struct DeviceRegion<'a> {
    /// The allocation (to note uses and keep it alive in a capture).
    pub(crate) alloc: &'a DeviceAlloc,
    /// Bytes from the start of the allocation.
    pub(crate) offset: usize,
    /// Bytes covered.
    pub(crate) bytes: usize,
    /// Elements covered.
    pub(crate) len: usize,
}

impl<'a> DeviceRegion<'a> {
    /// The device address of the first element; `None` on the CPU backend.
    pub(crate) fn ptr(&self) -> Option<sys::CUdeviceptr> {
        self.alloc.ptr().map(|p| p + self.offset as u64)
    }

    /// [`ptr`](Self::ptr), handed out for untracked use (see `DeviceAlloc::escaped_ptr`).
    pub(crate) fn escaped_ptr(&self) -> Option<sys::CUdeviceptr> {
        self.alloc.escaped_ptr().map(|p| p + self.offset as u64)
    }

    /// The CUDA range, when the memory is CUDA memory.
    pub(crate) fn cuda(&self) -> Option<cuda::DeviceRange<'a>> {
        match &self.alloc.memory {
            DeviceMemory::Cuda(memory) => Some(cuda::DeviceRange {
                memory,
                offset: self.offset,
                bytes: self.bytes,
            }),
            DeviceMemory::Cpu(_) => None,
        }
    }

    /// The CPU-backend range, when the memory is CPU-backend memory.
    pub(crate) fn cpu(&self) -> Option<cpu::Range> {
        match &self.alloc.memory {
            DeviceMemory::Cpu(memory) => Some(cpu::Range {
                memory: memory.clone(),
                offset: self.offset,
                bytes: self.bytes,
            }),
            DeviceMemory::Cuda(_) => None,
        }
    }
}

/// The pinned host memory one buffer or view covers.
#[derive(Clone, Copy, Debug)]
pub struct PinnedRegion<'a> {
    /// The allocation (to fence it, and keep it alive in a capture).
    pub(crate) alloc: &'a PinnedAlloc,
    /// Bytes from the start of the allocation.
    pub(crate) offset: usize,
    /// Bytes covered.
    pub(crate) bytes: usize,
    /// Elements covered.
    pub(crate) len: usize,
}

impl<'a> PinnedRegion<'a> {
    /// The CUDA range, when the memory is CUDA memory.
    pub(crate) fn cuda(&self) -> Option<cuda::PinnedRange<'a>> {
        match &self.alloc.memory {
            PinnedMemory::Cuda(memory) => Some(cuda::PinnedRange {
                memory,
                offset: self.offset,
                bytes: self.bytes,
            }),
            PinnedMemory::Cpu(_) => None,
        }
    }

    /// The CPU-backend range, when the memory is CPU-backend memory.
    pub(crate) fn cpu(&self) -> Option<cpu::Range> {
        match &self.alloc.memory {
            PinnedMemory::Cpu(memory) => Some(cpu::Range {
                memory: memory.clone(),
                offset: self.offset,
                bytes: self.bytes,
            }),
            PinnedMemory::Cuda(_) => None,
        }
    }
}

/// Builds the region of `len` elements of `T` starting `start` elements into `alloc`.
/// Byte counts cannot overflow: they lie within an allocation whose size was checked.
fn device_region<T>(alloc: &DeviceAlloc, start: usize, len: usize) -> DeviceRegion<'_> {
    let size = std::mem::size_of::<T>();
    DeviceRegion {
        alloc,
        offset: start * size,
        bytes: len * size,
        len,
    }
}

fn pinned_region<T>(alloc: &PinnedAlloc, start: usize, len: usize) -> PinnedRegion<'_> {
    let size = std::mem::size_of::<T>();
    PinnedRegion {
        alloc,
        offset: start * size,
        bytes: len * size,
        len,
    }
}

/// Declares a view type over an allocation type, with its shared methods.
macro_rules! view {
    ($(#[$meta:meta])* $name:ident, $alloc:ty, $marker:ty) => {
        $(#[$meta])*
        pub struct $name<'a, T> {
            alloc: &'a $alloc,
            /// Elements from the start of the allocation.
            start: usize,
            len: usize,
            _elem: PhantomData<$marker>,
        }

        impl<'a, T: Pod> $name<'a, T> {
            pub(crate) fn new(alloc: &'a $alloc, start: usize, len: usize) -> Self {
                $name {
                    alloc,
                    start,
                    len,
                    _elem: PhantomData,
                }
            }

            /// The number of elements.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether the view has no elements.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The size in bytes.
            pub fn size_bytes(&self) -> usize {
                self.len * std::mem::size_of::<T>()
            }

            /// The offset of the first element from the start of the buffer, in elements.
            pub fn offset(&self) -> usize {
                self.start
            }

        }

        impl<T> std::fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("start", &self.start)
                    .field("len", &self.len)
                    .finish()
            }
        }
    };
}

view! {
    /// A shared view of part of a device (or managed) buffer, like `&[T]`: a copy source.
    /// Take one with [`DeviceBuffer::slice`](crate::DeviceBuffer::slice).
    DeviceView, DeviceAlloc, &'a [T]
}

view! {
    /// An exclusive view of part of a device (or managed) buffer, like `&mut [T]`: a copy or
    /// memset destination, and a source. Take one with
    /// [`DeviceBuffer::slice_mut`](crate::DeviceBuffer::slice_mut) or split a buffer with
    /// [`DeviceBuffer::split_at_mut`](crate::DeviceBuffer::split_at_mut) to hand halves to
    /// two streams.
    DeviceViewMut, DeviceAlloc, &'a mut [T]
}

view! {
    /// A shared view of part of a pinned host buffer: a copy source.
    /// Take one with [`PinnedBuffer::slice`](crate::PinnedBuffer::slice).
    PinnedView, PinnedAlloc, &'a [T]
}

view! {
    /// An exclusive view of part of a pinned host buffer: a copy destination, and a source.
    /// Take one with [`PinnedBuffer::slice_mut`](crate::PinnedBuffer::slice_mut).
    PinnedViewMut, PinnedAlloc, &'a mut [T]
}

impl<T> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceView<'_, T> {}

impl<T> Clone for PinnedView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PinnedView<'_, T> {}

/// Resolves `range` within a view of `len` elements starting at `start`; returns the new
/// absolute start and length.
fn sub(
    call: &'static str,
    start: usize,
    len: usize,
    range: impl RangeBounds<usize>,
) -> Result<(usize, usize)> {
    let (offset, count) = check::resolve_range(call, &range, len)?;
    Ok((start + offset, count))
}

impl<'a, T: Pod> DeviceView<'a, T> {
    /// The device address of the first element, for interop (e.g. passing it to a CUDA
    /// library); `None` on the CPU backend. Work enqueued through it is not tracked, so from
    /// now on the buffer's drop synchronizes the context (see
    /// [`DeviceBuffer::device_ptr`](crate::DeviceBuffer::device_ptr)).
    pub fn device_ptr(&self) -> Option<sys::CUdeviceptr> {
        device_region::<T>(self.alloc, self.start, self.len).escaped_ptr()
    }

    /// A narrower view; `range` is relative to this view. Out of bounds is an error.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'a, T>> {
        let (start, len) = sub("DeviceView::slice", self.start, self.len, range)?;
        Ok(DeviceView::new(self.alloc, start, len))
    }
}

impl<'a, T: Pod> DeviceViewMut<'a, T> {
    /// The device address of the first element, for interop; `None` on the CPU backend. As
    /// for [`DeviceView::device_ptr`], the buffer's drop then synchronizes the context.
    pub fn device_ptr(&self) -> Option<sys::CUdeviceptr> {
        device_region::<T>(self.alloc, self.start, self.len).escaped_ptr()
    }

    /// A shared view of the same elements.
    pub fn as_view(&self) -> DeviceView<'_, T> {
        DeviceView::new(self.alloc, self.start, self.len)
    }

    /// A narrower shared view; `range` is relative to this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
        let (start, len) = sub("DeviceViewMut::slice", self.start, self.len, range)?;
        Ok(DeviceView::new(self.alloc, start, len))
    }

    /// A narrower exclusive view; `range` is relative to this view.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceViewMut<'_, T>> {
        let (start, len) = sub("DeviceViewMut::slice_mut", self.start, self.len, range)?;
        Ok(DeviceViewMut::new(self.alloc, start, len))
    }

    /// Splits into `[0, mid)` and `[mid, len)`; `mid > len` is an error.
    pub fn split_at_mut(self, mid: usize) -> Result<(DeviceViewMut<'a, T>, DeviceViewMut<'a, T>)> {
        check::split_point("DeviceViewMut::split_at_mut", mid, self.len)?;
        Ok((
            DeviceViewMut::new(self.alloc, self.start, mid),
            DeviceViewMut::new(self.alloc, self.start + mid, self.len - mid),
        ))
    }
}

impl<'a, T: Pod> PinnedView<'a, T> {
    /// A narrower view; `range` is relative to this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<PinnedView<'a, T>> {
        let (start, len) = sub("PinnedView::slice", self.start, self.len, range)?;
        Ok(PinnedView::new(self.alloc, start, len))
    }
}

impl<'a, T: Pod> PinnedViewMut<'a, T> {
    /// A shared view of the same elements.
    pub fn as_view(&self) -> PinnedView<'_, T> {
        PinnedView::new(self.alloc, self.start, self.len)
    }

    /// A narrower shared view; `range` is relative to this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<PinnedView<'_, T>> {
        let (start, len) = sub("PinnedViewMut::slice", self.start, self.len, range)?;
        Ok(PinnedView::new(self.alloc, start, len))
    }

    /// A narrower exclusive view; `range` is relative to this view.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<PinnedViewMut<'_, T>> {
        let (start, len) = sub("PinnedViewMut::slice_mut", self.start, self.len, range)?;
        Ok(PinnedViewMut::new(self.alloc, start, len))
    }

    /// Splits into `[0, mid)` and `[mid, len)`; `mid > len` is an error.
    pub fn split_at_mut(self, mid: usize) -> Result<(PinnedViewMut<'a, T>, PinnedViewMut<'a, T>)> {
        check::split_point("PinnedViewMut::split_at_mut", mid, self.len)?;
        Ok((
            PinnedViewMut::new(self.alloc, self.start, mid),
            PinnedViewMut::new(self.alloc, self.start + mid, self.len - mid),
        ))
    }
}

impl<T: Pod> sealed::DeviceMemory for DeviceView<'_, T> {
    fn device_region(&self) -> DeviceRegion<'_> {
        device_region::<T>(self.alloc, self.start, self.len)
    }
}
impl<T: Pod> DeviceSource<T> for DeviceView<'_, T> {}

impl<T: Pod> sealed::DeviceMemory for DeviceViewMut<'_, T> {
    fn device_region(&self) -> DeviceRegion<'_> {
        device_region::<T>(self.alloc, self.start, self.len)
    }
}
impl<T: Pod> DeviceSource<T> for DeviceViewMut<'_, T> {}
impl<T: Pod> DeviceDest<T> for DeviceViewMut<'_, T> {}

impl<T: Pod> sealed::PinnedMemory for PinnedView<'_, T> {
    fn pinned_region(&self) -> PinnedRegion<'_> {
        pinned_region::<T>(self.alloc, self.start, self.len)
    }
}
impl<T: Pod> PinnedSource<T> for PinnedView<'_, T> {}

impl<T: Pod> sealed::PinnedMemory for PinnedViewMut<'_, T> {
    fn pinned_region(&self) -> PinnedRegion<'_> {
        pinned_region::<T>(self.alloc, self.start, self.len)
    }
}
impl<T: Pod> PinnedSource<T> for PinnedViewMut<'_, T> {}
impl<T: Pod> PinnedDest<T> for PinnedViewMut<'_, T> {}

/// For the whole-buffer types: region helpers over `(alloc, len)`.
pub(crate) fn whole_device<T>(alloc: &DeviceAlloc, len: usize) -> DeviceRegion<'_> {
    device_region::<T>(alloc, 0, len)
}

pub(crate) fn whole_pinned<T>(alloc: &PinnedAlloc, len: usize) -> PinnedRegion<'_> {
    pinned_region::<T>(alloc, 0, len)
}
