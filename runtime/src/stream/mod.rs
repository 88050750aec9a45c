//! Streams: in-order queues of device work.
//!
//! | group | methods |
//! | --- | --- |
//! | creation | [`Stream::new`], [`Stream::non_blocking`], [`Stream::with_flags`], [`Stream::with_priority`], [`Stream::from_handle`] (CUDA) |
//! | queries | [`Stream::flags`], [`Stream::priority`], [`Stream::is_nonblocking`], [`Stream::is_complete`], [`Stream::id`], [`Stream::context`], [`Stream::device`], [`Stream::handle`] |
//! | ordering | [`Stream::synchronize`], [`Stream::wait_event`], [`Stream::wait`], [`Stream::record`], [`Stream::record_into`] |
//! | host work | [`Stream::launch_host_func`], [`Stream::launch_host_fn`], [`Stream::add_callback`] |
//! | attributes (CUDA) | [`Stream::get_attribute`], [`Stream::set_attribute`], [`Stream::copy_attributes_from`] |
//! | memory ops | [`Stream::write_value_32`], [`Stream::write_value_64`], [`Stream::wait_value_32`], [`Stream::wait_value_64`], [`Stream::batch_mem_op`], [`Stream::attach_mem_async`] |
//! | capture | [`Stream::begin_capture`], [`Stream::end_capture`], [`Stream::capture`], [`Stream::is_capturing`], [`Stream::capture_status`] |
//! | teardown | [`Stream::close`], `Drop` |

mod attach;
mod copy;
mod host_fn;
mod memop;

use std::any::Any;
use std::sync::{Arc, OnceLock};

use crate::context::{Context, ContextBackend};
use crate::cpu;
use crate::cuda::{self, Device};
use crate::error::{Error, Result};
use crate::event::{Event, EventBackend, EventFlags};
use crate::sys;
use crate::vocab::backend::BackendStream;

pub use crate::vocab::attribute::{
    AccessPolicyWindow, AccessProperty, StreamAttribute, StreamAttributeId, SyncPolicy,
};
pub use memop::{MemOp, WaitCondition};

/// Stream creation flags.
///
/// ```
/// use gpu_pipeline::{Context, Stream, StreamFlags};
/// let ctx = Context::cpu();
/// let stream = Stream::with_flags(&ctx, StreamFlags { non_blocking: true })?;
/// assert!(stream.flags()?.non_blocking);
/// assert!(!Stream::new(&ctx)?.is_nonblocking()?); // `StreamFlags::default()`
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StreamFlags {
    /// The stream does not synchronize with the legacy default (NULL) stream.
    pub non_blocking: bool,
}

impl StreamFlags {
    pub(crate) fn raw(self) -> u32 {
        if self.non_blocking {
            sys::CU_STREAM_NON_BLOCKING
        } else {
            sys::CU_STREAM_DEFAULT
        }
    }

    pub(crate) fn from_raw(raw: u32) -> StreamFlags {
        StreamFlags {
            non_blocking: raw & sys::CU_STREAM_NON_BLOCKING != 0,
        }
    }
}

/// A stream: work enqueued on it runs in order; work on different streams may overlap unless
/// ordered by events.
///
/// `Stream` is `Send + Sync`: CUDA allows enqueueing on one stream from several threads (each
/// call is atomic; the interleaving between threads is up to them).
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream};
/// let ctx = Context::cpu();
/// let (upload, compute) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
/// let input = PinnedBuffer::from_slice(&ctx, &[1u32, 2, 3, 4])?;
/// let mut field = DeviceBuffer::<u32>::alloc(&ctx, 4)?;
/// upload.copy_htod(&input, &mut field)?;
/// compute.join(&upload)?; // later work on `compute` sees the upload
/// let mut output = PinnedBuffer::<u32>::zeros(&ctx, 4)?;
/// compute.copy_dtoh(&field, &mut output)?;
/// assert_eq!(output.as_slice()?, [1, 2, 3, 4]); // waits for the copy
/// # Ok(()) }
/// ```
pub struct Stream {
    ctx: Context,
    backend: StreamBackend,
    /// A reusable event for [`Stream::join`]: re-recording is fine, since a wait captures the
    /// event's state at the time it is enqueued.
    join_event: OnceLock<Event>,
    /// What keeps a borrowed handle alive, when the stream came from another library's
    /// owning value (a cudarc stream): dropped after `backend`, which never destroys it.
    _lender: Option<Arc<dyn Any + Send + Sync>>,
}

/// The one backend value a [`Stream`] holds.
pub(crate) enum StreamBackend {
    /// A CUDA stream.
    Cuda(cuda::Stream),
    /// A CPU-backend stream: an in-order queue on its own worker thread.
    Cpu(cpu::Stream),
}

impl Stream {
    /// A stream with default flags (synchronizes with the legacy default stream).
    pub fn new(ctx: &Context) -> Result<Stream> {
        Stream::with_flags(ctx, StreamFlags::default())
    }

    /// A stream that does not synchronize with the legacy default stream; what pipelines use.
    pub fn non_blocking(ctx: &Context) -> Result<Stream> {
        Stream::with_flags(ctx, StreamFlags { non_blocking: true })
    }

    /// A stream with these flags.
    pub fn with_flags(ctx: &Context, flags: StreamFlags) -> Result<Stream> {
        Stream::create(ctx, flags, None, None)
    }

    /// A stream with a priority. Lower numbers are more urgent; values outside
    /// [`Context::stream_priority_range`] are clamped by the driver, and [`Stream::priority`]
    /// reads back the clamped value.
    pub fn with_priority(ctx: &Context, flags: StreamFlags, priority: i32) -> Result<Stream> {
        Stream::create(ctx, flags, Some(priority), None)
    }

    /// A stream; `name` names it in the CPU backend's race reports and labels (CUDA streams
    /// have no name).
    pub(crate) fn create(
        ctx: &Context,
        flags: StreamFlags,
        priority: Option<i32>,
        name: Option<String>,
    ) -> Result<Stream> {
        let backend = match ctx.kind() {
            ContextBackend::Cuda(c) => {
                StreamBackend::Cuda(cuda::Stream::create(c, flags.raw(), priority)?)
            }
            // Priorities are clamped and readable; scheduling by them is best effort.
            ContextBackend::Cpu(c) => StreamBackend::Cpu(c.create_stream(cpu::StreamOptions {
                name: name.map(std::borrow::Cow::Owned),
                priority: priority.unwrap_or(c.priority_range().0),
                non_blocking: flags.non_blocking,
            })?),
        };
        Ok(Stream {
            ctx: ctx.clone(),
            backend,
            join_event: OnceLock::new(),
            _lender: None,
        })
    }

    /// Wraps a backend stream of `ctx`.
    pub(crate) fn from_backend(ctx: &Context, backend: StreamBackend) -> Stream {
        Stream {
            ctx: ctx.clone(),
            backend,
            join_event: OnceLock::new(),
            _lender: None,
        }
    }

    /// A stream over a handle another library owns, keeping `lender` (the library's owning
    /// value) alive for as long as the stream.
    #[cfg(feature = "cudarc")]
    pub(crate) fn with_lender(
        ctx: &Context,
        backend: StreamBackend,
        lender: Arc<dyn Any + Send + Sync>,
    ) -> Stream {
        Stream {
            _lender: Some(lender),
            ..Stream::from_backend(ctx, backend)
        }
    }

    /// The backend value, for the crate's dispatch.
    pub(crate) fn kind(&self) -> &StreamBackend {
        &self.backend
    }

    /// The CUDA stream, or the error every CUDA-only operation returns on the CPU backend.
    pub(crate) fn cuda_only(&self, call: &'static str) -> Result<&cuda::Stream> {
        match &self.backend {
            StreamBackend::Cuda(s) => Ok(s),
            StreamBackend::Cpu(_) => Err(Error::cuda_only(call)),
        }
    }

    /// The raw handle, for interop with other CUDA libraries; `None` on the CPU backend. It
    /// stays owned by this `Stream`.
    pub fn handle(&self) -> Option<sys::CUstream> {
        match &self.backend {
            StreamBackend::Cuda(s) => Some(s.raw()),
            StreamBackend::Cpu(_) => None,
        }
    }

    /// The context the stream belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Whether this stream was borrowed with [`Stream::from_handle`].
    pub fn is_borrowed(&self) -> bool {
        matches!(&self.backend, StreamBackend::Cuda(s) if !s.is_owned())
    }

    /// The creation flags, as the driver reports them.
    pub fn flags(&self) -> Result<StreamFlags> {
        match &self.backend {
            StreamBackend::Cuda(s) => Ok(StreamFlags::from_raw(s.flags()?)),
            StreamBackend::Cpu(s) => Ok(StreamFlags {
                non_blocking: s.is_non_blocking(),
            }),
        }
    }

    /// Whether the stream does not synchronize with the legacy default stream.
    pub fn is_nonblocking(&self) -> Result<bool> {
        Ok(self.flags()?.non_blocking)
    }

    /// The priority, after the driver's clamping.
    pub fn priority(&self) -> Result<i32> {
        match &self.backend {
            StreamBackend::Cuda(s) => BackendStream::priority(s),
            StreamBackend::Cpu(s) => BackendStream::priority(s),
        }
    }

    /// A process-unique id for this stream, never reused (on CUDA, the driver's
    /// `cuStreamGetId`).
    pub fn id(&self) -> u64 {
        match &self.backend {
            StreamBackend::Cuda(s) => BackendStream::id(s),
            StreamBackend::Cpu(s) => BackendStream::id(s),
        }
    }

    /// The device the stream runs on (CUDA only). Uses `cuStreamGetDevice` (CUDA 12.8) when
    /// the driver has it, and checks it against the context's device.
    pub fn device(&self) -> Result<Device> {
        self.cuda_only("Stream::device")?.device()
    }

    /// Whether all work enqueued so far has completed (`cuStreamQuery`).
    pub fn is_complete(&self) -> Result<bool> {
        match &self.backend {
            StreamBackend::Cuda(s) => BackendStream::is_complete(s),
            StreamBackend::Cpu(s) => BackendStream::is_complete(s),
        }
    }

    /// Blocks until all enqueued work has completed. Reports, in this order: a driver error
    /// (including an asynchronous fault of earlier work), then a panic caught in a host
    /// function that ran on this stream since the last synchronize (a captured host function
    /// is reported by the stream that launched its graph).
    ///
    /// A wait on NCCL communication returns at most the communicator's deadline after it was
    /// enqueued (the watchdog aborts a communicator that misses it), with
    /// [`Error::Communication`] naming the failed operation.
    pub fn synchronize(&self) -> Result<()> {
        match &self.backend {
            StreamBackend::Cuda(s) => {
                let synced = BackendStream::synchronize(s);
                self.comm_failure_after_wait().and(synced)
            }
            StreamBackend::Cpu(s) => BackendStream::synchronize(s),
        }
    }

    /// After a host wait for this stream's work: [`Error::Communication`] if communication
    /// enqueued on it since its last synchronize failed (NCCL: the watchdog aborted its
    /// communicator; CPU backend: the stream's pending fault, which its next synchronize
    /// still reports).
    pub(crate) fn comm_failure_after_wait(&self) -> Result<()> {
        match &self.backend {
            StreamBackend::Cuda(s) => match crate::nccl::failure_after_wait(s.raw() as usize) {
                Some(failure) => Err(failure.into()),
                None => Ok(()),
            },
            StreamBackend::Cpu(s) => s
                .pending_communication_failure()
                .map_or(Ok(()), |f| Err(f.into())),
        }
    }

    /// Makes later work on this stream wait until `event`'s most recent record completes.
    /// Waiting on an event that was never recorded is a no-op, as in CUDA. The event may
    /// belong to another device (as in CUDA; on the CPU backend, a device made together with
    /// this stream's by [`Context::cpu_devices`]).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        const CALL: &str = "Stream::wait_event";
        match (&self.backend, event.kind()) {
            (StreamBackend::Cuda(s), EventBackend::Cuda(e)) => {
                self.same_machine(CALL, event.context())?;
                s.wait_event(e)
            }
            (StreamBackend::Cpu(s), EventBackend::Cpu(e)) => {
                self.same_machine(CALL, event.context())?;
                Ok(s.wait(e)?)
            }
            _ => Err(mixed(CALL, "event")),
        }
    }

    /// Makes later work on this stream wait for all work enqueued on `other` so far (cudarc's
    /// `CudaStream::join`).
    ///
    /// ```
    /// use gpu_pipeline::{Context, DeviceBuffer, Stream};
    /// let ctx = Context::cpu();
    /// let (upload, compute) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
    /// let mut data = DeviceBuffer::from_slice(&upload, &[1u32, 2, 3])?;
    /// compute.join(&upload)?; // `compute` now sees the upload
    /// compute.memset_u32(&mut data, 7)?;
    /// assert_eq!(data.to_vec(&compute)?, [7, 7, 7]);
    /// # Ok::<(), gpu_pipeline::Error>(())
    /// ```
    pub fn join(&self, other: &Stream) -> Result<()> {
        const CALL: &str = "Stream::join";
        if let (StreamBackend::Cpu(s), StreamBackend::Cpu(o)) = (&self.backend, &other.backend) {
            self.same_machine(CALL, other.context())?;
            return Ok(s.wait_stream(o)?);
        }
        let event = match other.join_event.get() {
            Some(event) => event,
            None => {
                let event = Event::with_flags(&other.ctx, EventFlags::ORDERING)?;
                other.join_event.get_or_init(|| event)
            }
        };
        other.record_into(event)?;
        self.wait_event(event)
    }

    /// [`Stream::join`] under its earlier name.
    ///
    /// Deprecated because cudarc, which many users come from, calls this `join` and uses
    /// `wait` for an event (our [`Stream::wait_event`]); a later version may give `wait` that
    /// meaning. See `docs/FROM_CUDARC.md`.
    #[deprecated(
        since = "0.1.0",
        note = "renamed `join` (cudarc's name); to wait on an event, use `wait_event`"
    )]
    pub fn wait(&self, other: &Stream) -> Result<()> {
        self.join(other)
    }

    /// Records a new event at the current end of this stream.
    pub fn record(&self) -> Result<Event> {
        let event = Event::new(&self.ctx)?;
        self.record_into(&event)?;
        Ok(event)
    }

    /// Records `event` at the current end of this stream (re-recording moves it).
    pub fn record_into(&self, event: &Event) -> Result<()> {
        const CALL: &str = "Stream::record_into";
        match (&self.backend, event.kind()) {
            (StreamBackend::Cuda(s), EventBackend::Cuda(e)) => {
                self.same_context(CALL, event.context())?;
                s.record(e)?;
                // A wait on the event waits for the stream's communication too.
                crate::nccl::note_record(s.raw() as usize, e.raw() as usize);
                Ok(())
            }
            (StreamBackend::Cpu(s), EventBackend::Cpu(e)) => {
                self.same_context(CALL, event.context())?;
                Ok(s.record(e)?)
            }
            _ => Err(mixed(CALL, "event")),
        }
    }

    /// Reads one attribute (CUDA only).
    pub fn get_attribute(&self, id: StreamAttributeId) -> Result<StreamAttribute> {
        self.cuda_only("Stream::get_attribute")?.get_attribute(id)
    }

    /// Sets one attribute (CUDA only).
    pub fn set_attribute(&self, attribute: StreamAttribute) -> Result<()> {
        self.cuda_only("Stream::set_attribute")?
            .set_attribute(attribute)
    }

    /// Copies the attributes (access policy window, synchronization policy, ...) of `src`
    /// (CUDA only).
    pub fn copy_attributes_from(&self, src: &Stream) -> Result<()> {
        const CALL: &str = "Stream::copy_attributes_from";
        let (dst, from) = (self.cuda_only(CALL)?, src.cuda_only(CALL)?);
        self.same_context(CALL, src.context())?;
        dst.copy_attributes_from(from)
    }

    /// Destroys the stream now and returns the driver's verdict (and any host-function panic
    /// not yet reported), instead of logging it as `Drop` does. Work already enqueued still
    /// completes.
    pub fn close(self) -> Result<()> {
        let Stream { backend, .. } = self;
        match backend {
            StreamBackend::Cuda(mut s) => s.destroy(),
            // Dropping the queue runs what is queued and joins its worker.
            StreamBackend::Cpu(s) => Ok(s.close()?),
        }
    }

    /// Checks that `other` (an event's or stream's context) may order this stream: a context
    /// of the same machine (see `Context::same_machine`).
    pub(crate) fn same_machine(&self, call: &'static str, other: &Context) -> Result<()> {
        if self.ctx.same_machine(other) {
            Ok(())
        } else {
            Err(Error::mismatch(
                call,
                "the event or stream belongs to a context this stream cannot wait on (another \
                 backend, or CPU-backend devices not made together by `Context::cpu_devices`)",
            ))
        }
    }

    /// Checks that `other` (an event's or stream's context) is this stream's context.
    pub(crate) fn same_context(&self, call: &'static str, other: &Context) -> Result<()> {
        if self.ctx.same_as(other) || self.ctx.shares_memory_with(other) {
            Ok(())
        } else {
            Err(Error::mismatch(
                call,
                "the stream and the event or stream belong to different contexts",
            ))
        }
    }
}

/// The error of an operation pairing a stream with an object of the other backend.
#[cold]
pub(crate) fn mixed(call: &'static str, what: &str) -> Error {
    Error::mismatch(
        call,
        format!("the stream and the {what} belong to different backends (CUDA and CPU)"),
    )
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("backend", &self.ctx.backend())
            .field("id", &self.id())
            .field("raw", &self.handle())
            .field("borrowed", &self.is_borrowed())
            .finish()
    }
}
