//! Pinned (page-locked) host buffers: the host side of every asynchronous copy.

use std::marker::PhantomData;
use std::ops::RangeBounds;
use std::sync::Arc;

use bytemuck::Pod;

use super::alloc::PinnedAlloc;
use super::check;
use super::slice::{HostSlice, HostSliceMut};
use super::view::{
    self, PinnedDest, PinnedRegion, PinnedSource, PinnedView, PinnedViewMut, sealed,
};
use crate::context::Context;
use crate::error::Result;
use crate::host::Access;

/// `len` elements of `T` in page-locked host memory, which the device copies from and to
/// asynchronously ([`Stream::copy_htod`](crate::Stream::copy_htod),
/// [`Stream::copy_dtoh`](crate::Stream::copy_dtoh)).
///
/// Every enqueue that touches the memory records a fence in the allocation (one event per
/// stream). The host reaches the elements only through [`as_slice`](Self::as_slice) and
/// [`as_mut_slice`](Self::as_mut_slice), which first wait for every fence, and device work
/// that writes the buffer needs `&mut` of it for the enqueue, so no host slice is alive
/// then. The slices are guards ([`HostSlice`], [`HostSliceMut`]): a graph launch, which
/// borrows nothing, refuses to run while one of memory it touches is alive. Dropping the
/// buffer waits for the fences before freeing.
///
/// On the host backend the memory is an ordinary heap allocation, and the same rules hold.
///
/// ```no_run
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream};
/// let ctx = Context::cuda(0)?;
/// let stream = Stream::non_blocking(&ctx)?;
/// let field = DeviceBuffer::<f32>::zeros(&stream, 1024)?;
/// let mut snapshot = PinnedBuffer::<f32>::zeros(&ctx, 1024)?;
/// stream.copy_dtoh(&field, &mut snapshot)?; // returns at once
/// let host = snapshot.as_slice()?; // waits for the copy
/// assert!(host.iter().all(|&x| x == 0.0));
/// # Ok(()) }
/// ```
pub struct PinnedBuffer<T: Pod> {
    alloc: Arc<PinnedAlloc>,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> PinnedBuffer<T> {
    /// Allocates room for `len` elements and initialises it with `init(ptr, bytes)`.
    fn with_init(
        call: &'static str,
        ctx: &Context,
        len: usize,
        init: impl FnOnce(*mut u8, usize),
    ) -> Result<Self> {
        let bytes = check::byte_len(call, len, std::mem::size_of::<T>())?;
        let alloc = PinnedAlloc::new(ctx, bytes)?;
        check::host_alignment(call, alloc.ptr as usize, std::mem::align_of::<T>())?;
        init(alloc.ptr, bytes);
        Ok(PinnedBuffer {
            alloc: Arc::new(alloc),
            len,
            _elem: PhantomData,
        })
    }

    /// `len` zeroed elements.
    pub fn zeros(ctx: &Context, len: usize) -> Result<Self> {
        Self::with_init("PinnedBuffer::zeros", ctx, len, |ptr, bytes| {
            // SAFETY: a fresh allocation of at least `bytes` bytes that nothing else sees yet.
            unsafe { std::ptr::write_bytes(ptr, 0, bytes) }
        })
    }

    /// A pinned copy of `data`.
    pub fn from_slice(ctx: &Context, data: &[T]) -> Result<Self> {
        let src: &[u8] = bytemuck::cast_slice(data);
        Self::with_init("PinnedBuffer::from_slice", ctx, data.len(), |ptr, bytes| {
            debug_assert_eq!(bytes, src.len());
            // SAFETY: a fresh allocation of `bytes == src.len()` bytes that nothing else sees
            // yet, so it cannot overlap `src`.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ptr, bytes) }
        })
    }

    /// Names the buffer in the host backend's race reports and operation labels (e.g. after
    /// the variable or pipeline parameter it is); no effect on CUDA.
    pub fn named(self, name: &str) -> Self {
        if let Some(mem) = &self.alloc.host {
            mem.set_name(name);
        }
        self
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

    /// The context the memory is registered with.
    pub fn context(&self) -> &Context {
        &self.alloc.ctx
    }

    /// Whether enqueued work that touches the buffer is still pending (does not block).
    pub fn is_busy(&self) -> Result<bool> {
        self.alloc.is_busy()
    }

    /// Blocks until no enqueued work touches the buffer any more. An asynchronous fault of
    /// that work is returned as the error.
    pub fn synchronize(&self) -> Result<()> {
        self.alloc.wait_for_device()
    }

    /// The elements, after waiting for every pending piece of work that touches them
    /// (see [`synchronize`](Self::synchronize)). While the guard lives, launching a graph
    /// that copies to or from this buffer fails.
    pub fn as_slice(&self) -> Result<HostSlice<'_, T>> {
        self.alloc.begin_host_access(Access::Read)?;
        // SAFETY: the allocation holds `len * size_of::<T>()` initialised bytes (zeroed or
        // copied at creation; later written only by copies of `T`s), aligned for `T`
        // (checked at creation). No enqueued work writes it now (every fence has completed)
        // or can start to while this borrow lives: enqueueing a write takes `&mut self`, and
        // a graph launch checks the borrow counted above under the same gate that orders it
        // with the fence wait.
        let slice = unsafe {
            std::slice::from_raw_parts(self.alloc.ptr.cast::<T>().cast_const(), self.len)
        };
        Ok(HostSlice::new(slice, &self.alloc.borrows))
    }

    /// The elements, mutably, after waiting for every pending piece of work that touches
    /// them. While the guard lives, launching a graph that touches this buffer fails.
    pub fn as_mut_slice(&mut self) -> Result<HostSliceMut<'_, T>> {
        self.alloc.begin_host_access(Access::Write)?;
        // SAFETY: as in `as_slice`; in addition no enqueued work reads the memory now, and
        // `&mut self` keeps anything from enqueueing work on it while the slice lives.
        let slice = unsafe { std::slice::from_raw_parts_mut(self.alloc.ptr.cast::<T>(), self.len) };
        Ok(HostSliceMut::new(slice, &self.alloc.borrows))
    }

    /// The elements copied into a `Vec` (waits like [`as_slice`](Self::as_slice)).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.as_slice()?.to_vec())
    }

    /// Overwrites every element with `data` (waits like [`as_mut_slice`](Self::as_mut_slice)).
    /// The lengths must match.
    pub fn copy_from_slice(&mut self, data: &[T]) -> Result<()> {
        check::same_len("PinnedBuffer::copy_from_slice", data.len(), self.len)?;
        self.as_mut_slice()?.copy_from_slice(data);
        Ok(())
    }

    /// A shared view of all elements, for copies.
    pub fn as_view(&self) -> PinnedView<'_, T> {
        PinnedView::new(&self.alloc, 0, self.len)
    }

    /// An exclusive view of all elements, for copies.
    pub fn as_view_mut(&mut self) -> PinnedViewMut<'_, T> {
        PinnedViewMut::new(&self.alloc, 0, self.len)
    }

    /// A shared view of `range`, for copies; out of bounds is an error.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<PinnedView<'_, T>> {
        let (start, len) = check::resolve_range("PinnedBuffer::slice", &range, self.len)?;
        Ok(PinnedView::new(&self.alloc, start, len))
    }

    /// An exclusive view of `range`, for copies; out of bounds is an error.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<PinnedViewMut<'_, T>> {
        let (start, len) = check::resolve_range("PinnedBuffer::slice_mut", &range, self.len)?;
        Ok(PinnedViewMut::new(&self.alloc, start, len))
    }

    /// Exclusive views of `[0, mid)` and `[mid, len)`; `mid > len` is an error.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(PinnedViewMut<'_, T>, PinnedViewMut<'_, T>)> {
        self.as_view_mut().split_at_mut(mid)
    }

    /// The shared allocation, for crate code that enqueues work on the buffer: call
    /// `prepare_fence` before and `fence_after_enqueue` after each enqueue outside a capture,
    /// and keep it alive in a capture.
    #[allow(dead_code)]
    pub(crate) fn alloc_handle(&self) -> &Arc<PinnedAlloc> {
        &self.alloc
    }
}

impl<T: Pod> sealed::PinnedMemory for PinnedBuffer<T> {
    fn pinned_region(&self) -> PinnedRegion<'_> {
        view::whole_pinned::<T>(&self.alloc, self.len)
    }
}
impl<T: Pod> PinnedSource<T> for PinnedBuffer<T> {}
impl<T: Pod> PinnedDest<T> for PinnedBuffer<T> {}

impl<T: Pod> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.len)
            .field("ptr", &self.alloc.ptr)
            .finish()
    }
}
