//! Interop with [cudarc](https://docs.rs/cudarc) (feature `cudarc`): what cuBLAS, cuDNN and
//! the crates built on cudarc (candle, ...) need to work inside a pipeline step, and what a
//! cudarc program needs to use gpu-pipeline on its own memory.
//!
//! - Streams, both ways: [`Stream::to_cudarc`] lends one of ours to cudarc (for a `CudaBlas`
//!   on a pipeline stream), [`Stream::from_cudarc`] borrows one of cudarc's. Both `unsafe`
//!   for one reason: a capture that cudarc begins on the shared stream would record our work
//!   into a graph that does not keep its memory alive. The rest is checked: the contexts
//!   match, and neither side can destroy the handle while the other holds it.
//! - A buffer of ours lent to cudarc and back: [`DeviceBuffer::cudarc_view`] and
//!   [`DeviceBuffer::cudarc_view_mut`] give cudarc views of the buffer for as long as they
//!   borrow it. The buffer then counts as used on every stream (cudarc may enqueue on any),
//!   so its drop waits for the whole context.
//! - cudarc's memory in a pipeline without a copy: [`DeviceBuffer::from_cudarc`] takes a
//!   `CudaSlice` in (a buffer that does not own its allocation: it holds the slice, which
//!   does), for as long as any pipeline, graph or stream work uses it;
//!   [`DeviceBuffer::into_cudarc`] gives it back once nothing else holds it.
//!
//! cudarc's event tracking (on by default) records events on every use of a slice in a
//! context with several cudarc streams; inside a captured step those records become graph
//! nodes and outlive the graph (cudarc#590). gpu-pipeline orders its work itself: views are
//! refused on a context where cudarc manages stream synchronization; turn it off with
//! `unsafe { ctx.disable_event_tracking() }` before capturing, once no slice relies on it.
//!
//! Graphs that cudarc captures (`CudaStream::begin_capture`) do not keep memory alive, ours or
//! cudarc's: capture with gpu-pipeline (a pipeline's `capture`, `Stream::begin_capture`),
//! which does, and call cudarc inside the captured step.

use std::any::Any;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr};

use crate::TypedStream;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::memory::alloc::{DeviceAlloc, DeviceMemory as AllocMemory};
use crate::stream::{Stream, StreamBackend};
use crate::sys;

/// Checks that cudarc's context `theirs` is the CUDA context `ours`.
fn same_context(
    call: &'static str,
    ours: &crate::cuda::Context,
    theirs: &CudaContext,
) -> Result<()> {
    if std::ptr::eq(ours.raw().cast::<()>(), theirs.cu_ctx().cast::<()>()) {
        Ok(())
    } else {
        Err(Error::mismatch(
            call,
            format!(
                "cudarc's context (device {}) is not the gpu-pipeline context's; use \
                 `CudaContext::new(ordinal)` for the primary context of the same device",
                theirs.ordinal()
            ),
        ))
    }
}

/// Refuses a context whose cudarc event tracking would record events around each use of a
/// slice (see the module docs).
fn untracked(call: &'static str, ctx: &CudaContext) -> Result<()> {
    if ctx.is_managing_stream_synchronization() {
        return Err(Error::invalid(
            call,
            "cudarc manages stream synchronization on this context (event tracking with several \
             cudarc streams): its events would be recorded inside gpu-pipeline captures; call \
             `unsafe { ctx.disable_event_tracking() }` first (gpu-pipeline orders its own work)",
        ));
    }
    Ok(())
}

/// One of our streams lent to cudarc: dereferences to the `Arc<CudaStream>` cudarc's APIs
/// take (`CudaBlas::new`, launches, copies), and borrows the [`Stream`] it came from, so the
/// stream outlives it.
///
/// A clone of the `Arc` may outlive the borrow (a `CudaBlas` keeps one): that is safe too.
/// While any clone lives the handle is not destroyed: a [`Stream`] dropped before them leaks
/// its handle instead (with a warning), so drop cudarc's holders first.
///
/// ```
/// use gpu_pipeline::cudarc::driver::CudaContext;
/// use gpu_pipeline::{Backend, Context, DeviceBuffer, Stream};
/// let ctx = Context::auto()?;
/// if ctx.backend() != Backend::Cuda {
///     return Ok(()); // cudarc drives a GPU: nothing to lend on the CPU backend
/// }
/// let cu = CudaContext::new(0).expect("cudarc's context of device 0");
/// // SAFETY: no slice of this context relies on cudarc's event tracking.
/// unsafe { cu.disable_event_tracking() };
/// let stream = Stream::non_blocking(&ctx)?;
/// // SAFETY: nothing here begins a capture through cudarc.
/// let lent = unsafe { stream.to_cudarc(&cu)? };
/// assert_eq!(lent.cu_stream() as usize, stream.handle().unwrap() as usize);
/// // cudarc's work on it is ordered with ours: the upload, then our memset.
/// let mut x = DeviceBuffer::<u32>::alloc(&ctx, 4)?;
/// let y = lent.clone_htod(&[1u32, 2, 3, 4]).expect("cudarc's upload");
/// stream.memset_u32(&mut x, 9)?;
/// assert_eq!(lent.clone_dtoh(&y).expect("cudarc's download"), [1, 2, 3, 4]);
/// assert_eq!(x.to_vec(&stream)?, [9; 4]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Debug)]
pub struct CudarcStream<'s> {
    stream: Arc<CudaStream>,
    _owner: PhantomData<&'s Stream>,
}

impl std::ops::Deref for CudarcStream<'_> {
    type Target = Arc<CudaStream>;

    fn deref(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl Stream {
    /// Lends this stream to cudarc, as a `CudaStream` of `ctx` over the same handle: work
    /// cudarc enqueues on it (a cuBLAS call, say) is ordered with ours like any work on the
    /// stream, and is captured with it when this stream captures.
    ///
    /// `ctx` must be cudarc's context for the same device (`CudaContext::new(ordinal)`, the
    /// primary context gpu-pipeline uses too); another is [`Error::ContextMismatch`]. CUDA
    /// only.
    ///
    /// # Safety
    /// No capture may be begun on the returned stream, or any clone of it, through cudarc
    /// (`CudaStream::begin_capture`) while this `Stream` is alive: such a capture would record
    /// our work into a graph that does not keep its memory alive. (One that is begun anyway
    /// is refused by our next enqueue, which asks the driver; an enqueue racing with it on
    /// another thread may still be recorded.)
    pub unsafe fn to_cudarc(&self, ctx: &Arc<CudaContext>) -> Result<CudarcStream<'_>> {
        const CALL: &str = "Stream::to_cudarc";
        let s = self.cuda_only(CALL)?;
        same_context(CALL, s.context(), ctx)?;
        // SAFETY: `s.raw()` is a live stream of this context (checked above) and stays live
        // while cudarc holds it: this value outlives the borrow, and a clone that outlives
        // this value is registered below, so the handle is leaked rather than destroyed while
        // cudarc holds it. cudarc orders its work on the handle itself (same stream); the
        // capture hazard is the caller's contract.
        let stream = unsafe { ctx.wrap_borrowed_stream(s.raw().cast()) };
        let holder: Arc<dyn Any + Send + Sync> = stream.clone();
        s.lend(Arc::downgrade(&holder));
        Ok(CudarcStream {
            stream,
            _owner: PhantomData,
        })
    }

    /// Borrows a stream of cudarc's: work enqueued through the returned `Stream` goes to the
    /// same handle, ordered with cudarc's work on it. The `Stream` keeps `stream` (and so the
    /// handle) alive for as long as it lives, and never destroys it.
    ///
    /// `ctx` must be the gpu-pipeline context of the same device as cudarc's context (the
    /// primary context); another is [`Error::ContextMismatch`]. CUDA only.
    ///
    /// # Safety
    /// No capture may be begun on `stream` through cudarc while the returned `Stream` is
    /// alive (see [`Stream::to_cudarc`]): begin captures through the returned `Stream`.
    pub unsafe fn from_cudarc(ctx: &Context, stream: &Arc<CudaStream>) -> Result<Stream> {
        const CALL: &str = "Stream::from_cudarc";
        let c = ctx.cuda_only(CALL)?;
        same_context(CALL, c, stream.context())?;
        // SAFETY: cudarc's stream is a live stream of this context (checked above) for as
        // long as the `CudaStream` lives, and the returned `Stream` holds it (`lender`), so
        // the handle outlives the `Stream` and everything enqueued through it. A capture by
        // other code is excluded by the caller's contract (and refused when seen, since
        // borrowed handles ask the driver).
        let borrowed = unsafe { crate::cuda::Stream::borrow(c, stream.cu_stream().cast())? };
        let lender: Arc<dyn Any + Send + Sync> = stream.clone();
        Ok(Stream::with_lender(
            ctx,
            StreamBackend::Cuda(borrowed),
            lender,
        ))
    }
}

impl<M> TypedStream<'_, M> {
    /// Lends the pipeline stream to cudarc: [`Stream::to_cudarc`]. In a `call` statement,
    /// the library's work on it becomes part of the step (and of its captured graph).
    ///
    /// # Safety
    /// As for [`Stream::to_cudarc`]: no capture begun through cudarc on the returned stream
    /// while the pipeline lives.
    pub unsafe fn to_cudarc(&self, ctx: &Arc<CudaContext>) -> Result<CudarcStream<'_>> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.stream().to_cudarc(ctx) }
    }
}

/// cudarc's view of a [`DeviceBuffer`] lent to it for reading (see
/// [`DeviceBuffer::cudarc_view`]). The buffer is borrowed while this lives; dropping it
/// gives the memory back (nothing is freed).
///
/// ```
/// use gpu_pipeline::cudarc::driver::CudaContext;
/// use gpu_pipeline::{Backend, Context, DeviceBuffer, Stream};
/// let ctx = Context::auto()?;
/// if ctx.backend() != Backend::Cuda {
///     return Ok(()); // cudarc drives a GPU: nothing to lend on the CPU backend
/// }
/// let cu = CudaContext::new(0).expect("cudarc's context of device 0");
/// // SAFETY: no slice of this context relies on cudarc's event tracking.
/// unsafe { cu.disable_event_tracking() };
/// let stream = Stream::non_blocking(&ctx)?;
/// // SAFETY: nothing here begins a capture through cudarc.
/// let lent = unsafe { stream.to_cudarc(&cu)? };
/// let x = DeviceBuffer::from_slice(&stream, &[1.5f32; 8])?;
/// let view = x.cudarc_view(&lent)?; // `x` is borrowed until `view` is dropped
/// let seen = lent.clone_dtoh(&view.view()).expect("cudarc reads our buffer");
/// assert_eq!(seen, [1.5; 8]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub struct CudarcView<'a, T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    /// The buffer's borrow, as a borrow of its elements.
    _buffer: PhantomData<&'a [T]>,
}

/// cudarc's view of a [`DeviceBuffer`] lent to it for reading and writing (see
/// [`DeviceBuffer::cudarc_view_mut`]). The buffer is borrowed exclusively while this lives;
/// dropping it gives the memory back (nothing is freed).
///
/// ```
/// use gpu_pipeline::cudarc::driver::CudaContext;
/// use gpu_pipeline::{Backend, Context, DeviceBuffer, Stream};
/// let ctx = Context::auto()?;
/// if ctx.backend() != Backend::Cuda {
///     return Ok(()); // cudarc drives a GPU: nothing to lend on the CPU backend
/// }
/// let cu = CudaContext::new(0).expect("cudarc's context of device 0");
/// // SAFETY: no slice of this context relies on cudarc's event tracking.
/// unsafe { cu.disable_event_tracking() };
/// let stream = Stream::non_blocking(&ctx)?;
/// // SAFETY: nothing here begins a capture through cudarc.
/// let lent = unsafe { stream.to_cudarc(&cu)? };
/// let mut x = DeviceBuffer::<f32>::zeros(&stream, 8)?;
/// {
///     let mut view = x.cudarc_view_mut(&lent)?;
///     lent.memcpy_htod(&[2.0f32; 8], &mut view.view_mut()).expect("cudarc writes our buffer");
/// } // `x` is ours again
/// assert_eq!(x.to_vec(&stream)?, [2.0; 8]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub struct CudarcViewMut<'a, T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    /// The buffer's exclusive borrow, as one of its elements.
    _buffer: PhantomData<&'a mut [T]>,
}

impl<T> CudarcView<'_, T> {
    /// The view cudarc's APIs read through (it implements `DevicePtr`).
    pub fn view(&self) -> CudaView<'_, T> {
        self.slice.as_view()
    }
}

impl<T> CudarcViewMut<'_, T> {
    /// The view cudarc's APIs read through.
    pub fn view(&self) -> CudaView<'_, T> {
        self.slice.as_view()
    }

    /// The view cudarc's APIs write through (it implements `DevicePtrMut`).
    pub fn view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.slice.as_view_mut()
    }
}

/// Gives a lent slice back: `leak` returns the address without freeing it.
fn give_back<T>(slice: &mut ManuallyDrop<CudaSlice<T>>) {
    // SAFETY: called once, from the owner's `Drop`; the slice is not used afterwards.
    let slice = unsafe { ManuallyDrop::take(slice) };
    let _address = slice.leak();
}

impl<T> Drop for CudarcView<'_, T> {
    fn drop(&mut self) {
        give_back(&mut self.slice);
    }
}

impl<T> Drop for CudarcViewMut<'_, T> {
    fn drop(&mut self) {
        give_back(&mut self.slice);
    }
}

impl<T> std::fmt::Debug for CudarcView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudarcView")
            .field("len", &self.slice.len())
            .finish()
    }
}

impl<T> std::fmt::Debug for CudarcViewMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudarcViewMut")
            .field("len", &self.slice.len())
            .finish()
    }
}

impl<T: Pod> DeviceBuffer<T> {
    /// The CUDA memory of the buffer and its context, checked against cudarc's `stream`.
    fn lend_to(
        &self,
        call: &'static str,
        stream: &Arc<CudaStream>,
    ) -> Result<(sys::CUdeviceptr, usize)> {
        let AllocMemory::Cuda(memory) = &self.allocation().memory else {
            return Err(Error::cuda_only(call));
        };
        same_context(call, memory.context(), stream.context())?;
        untracked(call, stream.context())?;
        // Handed out: cudarc may enqueue work on any stream with it, so the buffer's free now
        // waits for the whole context.
        let ptr = self
            .allocation()
            .escaped_ptr()
            .ok_or_else(|| Error::cuda_only(call))?;
        Ok((ptr, self.len()))
    }

    /// Lends the buffer to cudarc for reading, e.g. as a GEMM operand: the returned value's
    /// [`view`](CudarcView::view) is a `CudaView` of the buffer's memory, with `stream` as
    /// the slice's stream. The buffer stays borrowed while it lives; no copy is made.
    ///
    /// Work cudarc enqueues with it may run on any stream, so from now on the buffer's drop
    /// (or [`Stream::free_async`]) synchronizes the context first. Refused on a context where
    /// cudarc manages stream synchronization (see [the crate docs](crate#interop-with-cudarc)), on another
    /// context than the buffer's, and on the CPU backend.
    pub fn cudarc_view(&self, stream: &Arc<CudaStream>) -> Result<CudarcView<'_, T>> {
        let (ptr, len) = self.lend_to("DeviceBuffer::cudarc_view", stream)?;
        // SAFETY: `ptr` is the base of this buffer's live allocation of at least `len`
        // elements of `T` in `stream`'s context (checked), initialised (`T: Pod`); the
        // returned value borrows the buffer, so the allocation outlives it, and it never frees
        // the memory (`leak` in its drop). cudarc reads it only (a shared view is all it
        // gets), while our safe code can only read it too (shared borrow). Work cudarc
        // enqueues that outlives the borrow is covered by the escape noted above: the free
        // waits for the whole context.
        let slice = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
        Ok(CudarcView {
            slice: ManuallyDrop::new(slice),
            _buffer: PhantomData,
        })
    }

    /// Lends the buffer to cudarc for reading and writing, e.g. as a GEMM output: the
    /// returned value's [`view_mut`](CudarcViewMut::view_mut) is a `CudaViewMut` of the
    /// buffer's memory. The buffer is borrowed exclusively while it lives; no copy is made.
    /// The rest is as for [`DeviceBuffer::cudarc_view`].
    pub fn cudarc_view_mut(&mut self, stream: &Arc<CudaStream>) -> Result<CudarcViewMut<'_, T>> {
        let (ptr, len) = self.lend_to("DeviceBuffer::cudarc_view_mut", stream)?;
        // SAFETY: as in `cudarc_view`; the exclusive borrow keeps our safe code off the
        // memory while cudarc may write it, and cudarc sees only views, never the owning
        // slice (which could be swapped out and dropped, freeing our memory).
        let slice = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
        Ok(CudarcViewMut {
            slice: ManuallyDrop::new(slice),
            _buffer: PhantomData,
        })
    }

    /// Takes cudarc's device memory in, without a copy: the buffer holds `slice` (which owns
    /// the allocation) for as long as anything uses the buffer, pipelines and captured graphs
    /// included. Dropping the last holder synchronizes the context and then drops `slice`,
    /// which frees it the cudarc way; [`DeviceBuffer::into_cudarc`] gives it back instead.
    ///
    /// `ctx` must be the gpu-pipeline context of the slice's device (its primary context);
    /// another is [`Error::ContextMismatch`]. CUDA only.
    pub fn from_cudarc(ctx: &Context, slice: CudaSlice<T>) -> Result<DeviceBuffer<T>>
    where
        T: Send + Sync + 'static,
    {
        const CALL: &str = "DeviceBuffer::from_cudarc";
        let c = ctx.cuda_only(CALL)?;
        same_context(CALL, c, slice.context())?;
        let len = slice.len();
        let bytes = slice.num_bytes();
        let stream = slice.stream().clone();
        // With cudarc's event tracking this waits for cudarc's pending writes on the slice's
        // stream and records a read there; without it, it is the address alone.
        let (ptr, record) = slice.device_ptr(&stream);
        drop(record);
        // Work cudarc enqueued on the slice's stream (its allocation, a fill) must be done
        // before our streams, which do not wait for it, use the memory.
        stream
            .synchronize()
            .map_err(|e| Error::external("cudarc (CudaStream::synchronize)", e))?;
        // SAFETY: `ptr` addresses the `bytes` bytes of `slice`'s allocation in this context
        // (checked), allocated for as long as `slice` lives, which the memory holds; the
        // slice moved in, so no other handle to the memory remains outside it; cudarc's
        // `CudaSlice<T>` holds initialised `T`s of a type we treat as `Pod`.
        let memory = unsafe { crate::cuda::DeviceMemory::foreign(c, ptr, bytes, Box::new(slice)) };
        let alloc = DeviceAlloc {
            ctx: ctx.clone(),
            memory: AllocMemory::Cuda(Arc::new(memory)),
        };
        Ok(DeviceBuffer::from_alloc(alloc, len))
    }

    /// Gives back the `CudaSlice` a buffer was made from ([`DeviceBuffer::from_cudarc`]), once
    /// this buffer is its last holder (no captured graph keeps it), after waiting for all work
    /// of the context. Fails, handing the buffer back, when another holder remains or the
    /// buffer was not made from a `CudaSlice`.
    pub fn into_cudarc(self) -> std::result::Result<CudaSlice<T>, Box<IntoCudarcError<T>>>
    where
        T: Send + Sync + 'static,
    {
        const CALL: &str = "DeviceBuffer::into_cudarc";
        let len = self.len();
        let alloc = self.into_alloc();
        let AllocMemory::Cuda(memory) = alloc.memory else {
            return Err(Box::new(IntoCudarcError {
                error: Error::cuda_only(CALL),
                buffer: Some(DeviceBuffer::from_alloc(alloc, len)),
            }));
        };
        let ctx = alloc.ctx;
        match crate::cuda::DeviceMemory::take_owner(memory) {
            Err(memory) => Err(Box::new(IntoCudarcError {
                error: Error::invalid(
                    CALL,
                    "the buffer is still held elsewhere (a captured graph keeps it), or was not \
                     made from a `CudaSlice`",
                ),
                buffer: Some(DeviceBuffer::from_alloc(
                    DeviceAlloc {
                        ctx,
                        memory: AllocMemory::Cuda(memory),
                    },
                    len,
                )),
            })),
            // The synchronize failed: the memory was dropped, and leaked since work may still
            // use it.
            Ok(Err(error)) => Err(Box::new(IntoCudarcError {
                error,
                buffer: None,
            })),
            Ok(Ok(owner)) => owner
                .downcast::<CudaSlice<T>>()
                .map(|slice| *slice)
                .map_err(|_| {
                    Box::new(IntoCudarcError {
                        error: Error::invalid(CALL, "the buffer held another type's memory"),
                        buffer: None,
                    })
                }),
        }
    }
}

/// Why [`DeviceBuffer::into_cudarc`] did not give the slice back, with the buffer when it
/// could be kept.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, Error, Stream};
/// let ctx = Context::auto()?;
/// let stream = Stream::new(&ctx)?;
/// // Our own allocation has no `CudaSlice` to give back: refused, the buffer handed back.
/// let buffer = DeviceBuffer::from_slice(&stream, &[1u8, 2, 3])?;
/// let refused = buffer.into_cudarc().unwrap_err();
/// assert!(
///     matches!(refused.error, Error::InvalidArgument { .. } | Error::BackendMismatch { .. }),
///     "{}",
///     refused.error
/// );
/// let buffer = refused.buffer.expect("the buffer, unchanged");
/// assert_eq!(buffer.to_vec(&stream)?, [1, 2, 3]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub struct IntoCudarcError<T: Pod> {
    /// What went wrong.
    pub error: Error,
    /// The buffer, unchanged; `None` when the wait for the context failed (the memory is then
    /// leaked, since work may still use it).
    pub buffer: Option<DeviceBuffer<T>>,
}

impl<T: Pod> std::fmt::Debug for IntoCudarcError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntoCudarcError")
            .field("error", &self.error)
            .field("buffer", &self.buffer)
            .finish()
    }
}

impl<T: Pod> std::fmt::Display for IntoCudarcError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the buffer could not be given back to cudarc")
    }
}

impl<T: Pod> std::error::Error for IntoCudarcError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<cudarc::driver::DriverError> for Error {
    /// A cudarc driver error, as the [`External`](Error::External) error it is.
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::external("cudarc", e)
    }
}
