//! Pinned (page-locked) host buffers: the host side of every asynchronous copy.

use std::marker::PhantomData;
use std::ops::RangeBounds;

use bytemuck::Pod;

use super::alloc::{PinnedAlloc, PinnedMemory};
use super::check;
use super::slice::{HostView, HostViewMut};
use super::view::{
    self, PinnedDest, PinnedRegion, PinnedSource, PinnedView, PinnedViewMut, sealed,
};
use crate::context::Context;
use crate::error::{Error, Result};

/// `len` elements of `T` in page-locked host memory, which the device copies from and to
/// asynchronously ([`Stream::copy_htod`](crate::Stream::copy_htod),
/// [`Stream::copy_dtoh`](crate::Stream::copy_dtoh)).
///
/// Every enqueue that touches the memory leaves a fence in the allocation: a number of its
/// stream's fence sequence, at no driver call on a stream this crate created (an event is
/// recorded only when a wait needs one, and a stream synchronize completes the fences before
/// it). The host reaches the elements only through [`as_slice`](Self::as_slice) and
/// [`as_mut_slice`](Self::as_mut_slice), which first wait for every fence, and device work
/// that writes the buffer needs `&mut` of it for the enqueue, so no host slice is alive
/// then. The slices are guards ([`HostView`], [`HostViewMut`]): a graph launch, which
/// borrows nothing, refuses to run while one of memory it touches is alive. Dropping the
/// buffer waits for the fences before freeing.
///
/// On the CPU backend the memory is an ordinary heap allocation, and the same rules hold:
/// host access waits for the work that touches the memory, and a host slice holds the
/// memory's lock while it lives.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream};
/// let ctx = Context::cpu(); // or Context::cuda(0)?: the same code
/// let stream = Stream::non_blocking(&ctx)?;
/// let field = DeviceBuffer::<f32>::zeros(&stream, 1024)?;
/// let mut snapshot = PinnedBuffer::<f32>::zeros(&ctx, 1024)?;
/// stream.copy_dtoh(&field, &mut snapshot)?; // returns at once
/// let host = snapshot.as_slice()?; // waits for the copy
/// assert!(host.iter().all(|&x| x == 0.0));
/// # Ok(()) }
/// ```
pub struct PinnedBuffer<T: Pod> {
    alloc: PinnedAlloc,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> PinnedBuffer<T> {
    /// `len` zeroed elements.
    pub fn zeros(ctx: &Context, len: usize) -> Result<Self> {
        const CALL: &str = "PinnedBuffer::zeros";
        let bytes = check::byte_len(CALL, len, std::mem::size_of::<T>())?;
        Ok(PinnedBuffer {
            alloc: PinnedAlloc::new(CALL, ctx, bytes)?,
            len,
            _elem: PhantomData,
        })
    }

    /// A pinned copy of `data`.
    pub fn from_slice(ctx: &Context, data: &[T]) -> Result<Self> {
        const CALL: &str = "PinnedBuffer::from_slice";
        let len = data.len();
        let bytes = check::byte_len(CALL, len, std::mem::size_of::<T>())?;
        Ok(PinnedBuffer {
            alloc: PinnedAlloc::with_data(CALL, ctx, bytes, Some(bytemuck::cast_slice(data)))?,
            len,
            _elem: PhantomData,
        })
    }

    /// Pins `data` in place, without a copy: the buffer takes the `Vec` over (its heap block
    /// cannot move or be freed while the driver has it page-locked), and
    /// [`into_vec`](Self::into_vec) hands it back. On CUDA the block is page-locked with
    /// `cuMemHostRegister`; an empty `Vec` or zero-sized elements need no pinning (the driver
    /// refuses zero bytes, and no copy touches them), so nothing is registered then. The
    /// buffer follows the same rules as one from [`zeros`](Self::zeros): host access waits
    /// for the work that touches it, and dropping it waits, unregisters and frees the `Vec`.
    ///
    /// On failure the `Vec` comes back inside the [`RegisterError`], untouched
    /// ([`RegisterError::into_data`]); `?` turns the error into an [`Error`] (dropping the
    /// `Vec`).
    ///
    /// Page-locking works on whole pages, and locking much memory slows the rest of the
    /// system: register large, long-lived staging buffers, not many small ones.
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream};
    /// let ctx = Context::cuda(0)?;
    /// let stream = Stream::non_blocking(&ctx)?;
    /// let frames: Vec<f32> = vec![1.0; 1 << 20]; // filled by some other library
    /// let pinned = PinnedBuffer::register(&ctx, frames)?;
    /// let mut device = DeviceBuffer::<f32>::alloc(&ctx, pinned.len())?;
    /// stream.copy_htod(&pinned, &mut device)?; // asynchronous: the memory is page-locked
    /// let frames: Vec<f32> = pinned.into_vec()?; // waits for the copy, unregisters
    /// assert_eq!(frames.len(), 1 << 20);
    /// # Ok(()) }
    /// ```
    pub fn register(ctx: &Context, data: Vec<T>) -> Result<Self, RegisterError<T>>
    where
        T: Send + Sync,
    {
        let len = data.len();
        match PinnedAlloc::register(ctx, data) {
            Ok(alloc) => Ok(PinnedBuffer {
                alloc,
                len,
                _elem: PhantomData,
            }),
            Err(inner) => Err(RegisterError { inner }),
        }
    }

    /// The elements as a `Vec`, giving the buffer up. Waits for every pending piece of work
    /// that touches the buffer first. When the buffer came from [`register`](Self::register)
    /// and nothing else holds its memory, this is the very `Vec` that was registered (same
    /// heap block, no copy), unregistered. When a captured graph still holds the memory (its
    /// replays keep copying from or to it), or the buffer was allocated by the crate, the
    /// elements are copied into a new `Vec` and the memory stays with the graph until it
    /// drops; the data is never lost either way.
    ///
    /// An asynchronous fault of the work that touched the buffer is returned as the error;
    /// the memory is then leaked rather than handed back, as the device may still use it.
    ///
    /// ```
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream};
    /// let ctx = Context::cpu();
    /// let stream = Stream::new(&ctx)?;
    /// let data = vec![1u32, 2, 3, 4];
    /// let block = data.as_ptr();
    /// let mut pinned = PinnedBuffer::register(&ctx, data)?;
    /// let device = DeviceBuffer::from_slice(&stream, &[5u32, 6, 7, 8])?;
    /// stream.copy_dtoh(&device, &mut pinned)?;
    /// let data = pinned.into_vec()?; // waits for the copy
    /// assert_eq!(data, [5, 6, 7, 8]);
    /// assert_eq!(data.as_ptr(), block); // the same allocation, handed back
    /// # Ok(()) }
    /// ```
    pub fn into_vec(self) -> Result<Vec<T>>
    where
        T: Send + Sync,
    {
        let len = self.len;
        // `PinnedBuffer` has a `Drop`, so its fields cannot be moved out: keep a handle to
        // the memory and drop the buffer (which only waits for work on the CPU backend).
        let alloc = self.alloc.clone();
        drop(self);
        alloc.into_vec(len)
    }

    /// Names the buffer in the CPU backend's race reports and operation labels (e.g. after
    /// the variable or pipeline parameter it is); no effect on CUDA.
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
    pub fn as_slice(&self) -> Result<HostView<'_, T>> {
        const CALL: &str = "PinnedBuffer::as_slice";
        Ok(match &self.alloc.memory {
            PinnedMemory::Cuda(m) => m.host_slice(CALL, 0, self.len)?.into(),
            PinnedMemory::Cpu(m) => m.host_slice(0, self.len)?.into(),
        })
    }

    /// The elements, mutably, after waiting for every pending piece of work that touches
    /// them. While the guard lives, launching a graph that touches this buffer fails.
    pub fn as_mut_slice(&mut self) -> Result<HostViewMut<'_, T>> {
        const CALL: &str = "PinnedBuffer::as_mut_slice";
        Ok(match &self.alloc.memory {
            PinnedMemory::Cuda(m) => m.host_slice_mut(CALL, 0, self.len)?.into(),
            PinnedMemory::Cpu(m) => m.host_slice_mut(0, self.len)?.into(),
        })
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

    /// An exclusive view of `range` from a shared borrow, for
    /// [`Apart`](crate::pipeline::refs::Apart) alone: it hands out each view once it has
    /// checked that no other view it gave of this buffer overlaps a written one, the
    /// exclusivity `&mut self` gives [`slice_mut`](Self::slice_mut).
    pub(crate) fn slice_mut_apart(
        &self,
        range: impl RangeBounds<usize>,
    ) -> Result<PinnedViewMut<'_, T>> {
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
            .field("memory", &self.alloc.memory)
            .finish()
    }
}

impl<T: Pod> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        // As on CUDA, dropping the buffer waits for the work that touches it (on CUDA the
        // memory's own drop does, once no graph holds it). Inside an operation nothing can be
        // waited for, and nothing needs to be: the operations hold the memory.
        if let PinnedMemory::Cpu(m) = &self.alloc.memory {
            let _ = m.wait_for_work();
        }
    }
}

/// The error of [`PinnedBuffer::register`]: why registering failed, and the `Vec` that was
/// to be registered, handed back untouched.
///
/// ```no_run
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, PinnedBuffer};
/// let ctx = Context::cuda(0)?;
/// let pinned = match PinnedBuffer::register(&ctx, vec![0u8; 1 << 20]) {
///     Ok(pinned) => pinned,
///     // Registering failed: fall back to a pinned copy of the same data.
///     Err(e) => {
///         eprintln!("{e}");
///         PinnedBuffer::from_slice(&ctx, &e.into_data())?
///     }
/// };
/// assert_eq!(pinned.len(), 1 << 20);
/// # Ok(()) }
/// ```
pub struct RegisterError<T> {
    /// Boxed: an `Err` as small as a pointer.
    inner: Box<(Error, Vec<T>)>,
}

impl<T> RegisterError<T> {
    /// Why registering failed (e.g. the driver's `cuMemHostRegister` error).
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, PinnedBuffer};
    /// let ctx = Context::cuda(0)?;
    /// if let Err(e) = PinnedBuffer::register(&ctx, vec![1.0f32; 1 << 20]) {
    ///     eprintln!("not pinned: {}", e.error());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn error(&self) -> &Error {
        &self.inner.0
    }

    /// The `Vec` that was to be registered, untouched.
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, PinnedBuffer};
    /// let ctx = Context::cuda(0)?;
    /// if let Err(e) = PinnedBuffer::register(&ctx, vec![1.0f32; 1 << 20]) {
    ///     let data: Vec<f32> = e.into_data(); // nothing is lost
    ///     assert_eq!(data.len(), 1 << 20);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_data(self) -> Vec<T> {
        self.inner.1
    }

    /// The error and the `Vec`.
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, PinnedBuffer};
    /// let ctx = Context::cuda(0)?;
    /// if let Err(e) = PinnedBuffer::register(&ctx, vec![1.0f32; 1 << 20]) {
    ///     let (error, data) = e.into_parts();
    ///     eprintln!("{error}; copying {} elements instead", data.len());
    ///     let _copy = PinnedBuffer::from_slice(&ctx, &data)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_parts(self) -> (Error, Vec<T>) {
        *self.inner
    }
}

impl<T> std::fmt::Debug for RegisterError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterError")
            .field("error", &self.inner.0)
            .field("len", &self.inner.1.len())
            .finish()
    }
}

impl<T> std::fmt::Display for RegisterError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "registering {} elements as pinned memory failed: {}",
            self.inner.1.len(),
            self.inner.0
        )
    }
}

impl<T> std::error::Error for RegisterError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.inner.0)
    }
}

impl<T> From<RegisterError<T>> for Error {
    /// The error alone (the `Vec` is dropped).
    fn from(e: RegisterError<T>) -> Error {
        e.inner.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_register_error_hands_the_vec_back_and_converts_into_an_error() {
        let refused = || RegisterError {
            inner: Box::new((
                Error::invalid("cuMemHostRegister", "refused"),
                vec![1u8, 2, 3],
            )),
        };
        let e = refused();
        assert!(e.to_string().contains("registering 3 elements"), "{e}");
        assert!(e.to_string().contains("refused"), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        assert!(matches!(e.error(), Error::InvalidArgument { .. }));
        assert_eq!(e.into_data(), [1, 2, 3]);
        let (error, data) = refused().into_parts();
        assert_eq!(
            (error.to_string(), data),
            (refused().error().to_string(), vec![1, 2, 3])
        );
        let as_error: Error = refused().into();
        assert!(matches!(
            as_error,
            Error::InvalidArgument {
                call: "cuMemHostRegister",
                ..
            }
        ));
        // `?` in a function returning the crate's `Result`.
        fn register_or_fail() -> Result<()> {
            Err(RegisterError {
                inner: Box::new((Error::invalid("x", "y"), vec![0u32])),
            })?
        }
        assert!(register_or_fail().is_err());
    }
}
