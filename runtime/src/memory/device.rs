//! Device buffers: typed device memory, owned by one handle and shared with the work that
//! uses it.

use std::marker::PhantomData;
use std::ops::RangeBounds;

use bytemuck::Pod;

use super::alloc::DeviceAlloc;
use super::check;
use super::pinned::PinnedBuffer;
use super::view::{
    self, DeviceDest, DeviceRegion, DeviceSource, DeviceView, DeviceViewMut, sealed,
};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::sys;

/// `len` elements of `T` in device memory.
///
/// Made by [`DeviceBuffer::alloc`], [`DeviceBuffer::zeros`], [`DeviceBuffer::from_slice`],
/// or in stream order by [`Stream::alloc_async`] and [`Stream::alloc_from_pool`]. Copies,
/// memsets and kernels take the whole buffer or a view ([`slice`](Self::slice),
/// [`slice_mut`](Self::slice_mut), [`split_at_mut`](Self::split_at_mut)): `&` where the
/// work reads, `&mut` where it writes.
///
/// The memory is shared (through an `Arc`) with every graph captured while using it, so it
/// outlives them. Dropping the buffer when it is the last holder frees it:
/// - memory from [`Stream::alloc_async`] or [`Stream::alloc_from_pool`] whose every use was
///   on the stream that allocated it, outside captures, and whose address was never handed
///   out ([`device_ptr`](Self::device_ptr)), is freed in that stream's order
///   (`cuMemFreeAsync`) while the stream lives: nothing waits, and other streams run on;
/// - any other memory is freed after the context is synchronized (all work of every stream
///   in it waits). For `cuMemAlloc` memory ([`DeviceBuffer::alloc`]) this remains so, since
///   `cuMemFree` is not stream-ordered: allocate temporaries of a time loop with
///   [`Stream::alloc_async`] on the stream that uses them.
///
/// [`Stream::free_async`] frees on a stream of your choice by the same rule.
///
/// On the CPU backend the memory is a heap allocation, registered with the race detector (see
/// [`named`](Self::named)), and it has no device address.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, DeviceBuffer, Stream};
/// let ctx = Context::cpu(); // or Context::cuda(0)?: the same code
/// let stream = Stream::non_blocking(&ctx)?;
/// let mut field = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 3.0, 4.0])?;
/// stream.memset_u32(&mut field.slice_mut(2..)?, 0)?;
/// assert_eq!(field.to_vec(&stream)?, [1.0, 2.0, 0.0, 0.0]);
/// // A temporary in stream order: freed on `stream` when dropped, without waiting.
/// let scratch = stream.alloc_async::<f32>(1024)?;
/// drop(scratch);
/// # Ok(()) }
/// ```
pub struct DeviceBuffer<T: Pod> {
    alloc: DeviceAlloc,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> DeviceBuffer<T> {
    /// Wraps an allocation of at least `len * size_of::<T>()` bytes.
    pub(crate) fn from_alloc(alloc: DeviceAlloc, len: usize) -> Self {
        debug_assert!(alloc.bytes() >= len * std::mem::size_of::<T>());
        DeviceBuffer {
            alloc,
            len,
            _elem: PhantomData,
        }
    }

    /// `len` elements with unspecified contents (`cuMemAlloc`). Safe, since any bits are a
    /// valid `T: Pod`; usable on every stream at once. On a checked CPU context
    /// ([`Context::cpu_checked`]) every byte starts as `0xFF` (NaN in a float), so a program
    /// that reads elements it never wrote sees that in its results, as it would see garbage
    /// on a GPU, rather than zeros.
    pub fn alloc(ctx: &Context, len: usize) -> Result<Self> {
        const CALL: &str = "DeviceBuffer::alloc";
        let bytes = check::byte_len(CALL, len, std::mem::size_of::<T>())?;
        Ok(Self::from_alloc(
            DeviceAlloc::new_unspecified(CALL, ctx, bytes)?,
            len,
        ))
    }

    /// `len` zeroed elements: allocated at once, zeroed in `stream`'s order (other streams
    /// must wait for `stream` before reading it).
    pub fn zeros(stream: &Stream, len: usize) -> Result<Self> {
        let mut buffer = Self::alloc(stream.context(), len)?;
        stream.memset_u8(&mut buffer, 0)?;
        Ok(buffer)
    }

    /// A buffer holding a copy of `data`, uploaded in `stream`'s order through a pinned
    /// staging buffer.
    ///
    /// Blocking: it returns once the upload (and so all work enqueued on `stream` before it)
    /// has completed, since the staging buffer is freed on return. During a capture it does
    /// not block: the captured graph keeps the staging buffer and uploads its contents (a
    /// copy of `data` taken now) at every launch.
    pub fn from_slice(stream: &Stream, data: &[T]) -> Result<Self> {
        let mut buffer = Self::alloc(stream.context(), data.len())?;
        if data.is_empty() {
            return Ok(buffer);
        }
        let staging = PinnedBuffer::from_slice(stream.context(), data)?;
        stream.copy_htod(&staging, &mut buffer)?;
        staging.synchronize()?;
        Ok(buffer)
    }

    /// Copies the contents to a `Vec`, in `stream`'s order. Blocking: it waits for all work
    /// enqueued on `stream` so far. Fails on a capturing stream (nothing can wait there).
    pub fn to_vec(&self, stream: &Stream) -> Result<Vec<T>> {
        if stream.is_capturing()? {
            return Err(Error::invalid(
                "DeviceBuffer::to_vec",
                "the stream is capturing, and a blocking read cannot be captured; enqueue \
                 `copy_dtoh` into a `PinnedBuffer` instead",
            ));
        }
        let mut staging = PinnedBuffer::zeros(stream.context(), self.len)?;
        stream.copy_dtoh(self, &mut staging)?;
        let values = staging.as_slice()?.to_vec();
        // It waited for the stream's work: failed communication among it is an error, not
        // undefined values.
        stream.comm_failure_after_wait()?;
        Ok(values)
    }

    /// Names the buffer in the CPU backend's race reports and operation labels (e.g. after
    /// the variable or pipeline parameter it is); no effect on CUDA.
    ///
    /// ```
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, DeviceBuffer};
    /// let ctx = Context::cpu_checked();
    /// let field = DeviceBuffer::<f32>::alloc(&ctx, 1024)?.named("field");
    /// # let _ = field;
    /// # Ok(()) }
    /// ```
    pub fn named(self, name: &str) -> Self {
        self.alloc.name(name);
        self
    }

    /// Names the buffer after the pipeline param it is passed as, in the checked CPU
    /// backend's reports, unless [`named`](Self::named) named it.
    pub(crate) fn name_as_param(&self, name: &str) {
        self.alloc.name_as_param(name);
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size in bytes (`len * size_of::<T>()`).
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The device address of the first element, for interop (e.g. a CUDA library call);
    /// `None` on the CPU backend. Work enqueued through the raw address is not tracked, so
    /// from this call on the buffer counts as used on every stream: its drop (and
    /// [`Stream::free_async`]) synchronizes the whole context before freeing. The code that
    /// enqueues work through the address (with `unsafe`) must still keep the buffer alive
    /// until that work is enqueued.
    pub fn device_ptr(&self) -> Option<sys::CUdeviceptr> {
        self.alloc.escaped_ptr()
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &Context {
        &self.alloc.ctx
    }

    /// A shared view of all elements.
    pub fn as_view(&self) -> DeviceView<'_, T> {
        DeviceView::new(&self.alloc, 0, self.len)
    }

    /// An exclusive view of all elements.
    pub fn as_view_mut(&mut self) -> DeviceViewMut<'_, T> {
        DeviceViewMut::new(&self.alloc, 0, self.len)
    }

    /// A shared view of `range`; out of bounds is an error.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
        let (start, len) = check::resolve_range("DeviceBuffer::slice", &range, self.len)?;
        Ok(DeviceView::new(&self.alloc, start, len))
    }

    /// An exclusive view of `range`; out of bounds is an error.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceViewMut<'_, T>> {
        let (start, len) = check::resolve_range("DeviceBuffer::slice_mut", &range, self.len)?;
        Ok(DeviceViewMut::new(&self.alloc, start, len))
    }

    /// An exclusive view of `range` from a shared borrow, for
    /// [`Apart`](crate::pipeline::refs::Apart) alone: it hands out each view once it has
    /// checked that no other view it gave of this buffer overlaps a written one, the
    /// exclusivity `&mut self` gives [`slice_mut`](Self::slice_mut).
    pub(crate) fn slice_mut_apart(
        &self,
        range: impl RangeBounds<usize>,
    ) -> Result<DeviceViewMut<'_, T>> {
        let (start, len) = check::resolve_range("DeviceBuffer::slice_mut", &range, self.len)?;
        Ok(DeviceViewMut::new(&self.alloc, start, len))
    }

    /// Exclusive views of `[0, mid)` and `[mid, len)`, e.g. for two streams to fill one half
    /// each; `mid > len` is an error.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(DeviceViewMut<'_, T>, DeviceViewMut<'_, T>)> {
        self.as_view_mut().split_at_mut(mid)
    }

    /// The allocation, for the backends' interop code.
    #[cfg(feature = "cudarc")]
    pub(crate) fn allocation(&self) -> &DeviceAlloc {
        &self.alloc
    }

    /// Gives up the allocation, for [`Stream::free_async`].
    pub(crate) fn into_alloc(self) -> DeviceAlloc {
        self.alloc
    }
}

impl<T: Pod> sealed::DeviceMemory for DeviceBuffer<T> {
    fn device_region(&self) -> DeviceRegion<'_> {
        view::whole_device::<T>(&self.alloc, self.len)
    }
}
impl<T: Pod> DeviceSource<T> for DeviceBuffer<T> {}
impl<T: Pod> DeviceDest<T> for DeviceBuffer<T> {}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("len", &self.len)
            .field("alloc", &self.alloc)
            .finish()
    }
}
