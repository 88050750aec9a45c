//! Streams: in-order queues of device work.
//!
//! | group | methods |
//! | --- | --- |
//! | creation | [`Stream::new`], [`Stream::non_blocking`], [`Stream::with_flags`], [`Stream::with_priority`], [`Stream::from_handle`] |
//! | queries | [`Stream::flags`], [`Stream::priority`], [`Stream::is_nonblocking`], [`Stream::is_complete`], [`Stream::id`], [`Stream::context`], [`Stream::device`], [`Stream::handle`] |
//! | ordering | [`Stream::synchronize`], [`Stream::wait_event`], [`Stream::wait`], [`Stream::record`], [`Stream::record_into`] |
//! | host work | [`Stream::launch_host_func`], [`Stream::launch_host_fn`], [`Stream::add_callback`] |
//! | attributes | [`Stream::get_attribute`], [`Stream::set_attribute`], [`Stream::copy_attributes_from`] |
//! | memory ops | [`Stream::write_value_32`], [`Stream::write_value_64`], [`Stream::wait_value_32`], [`Stream::wait_value_64`], [`Stream::batch_mem_op`], [`Stream::attach_mem_async`] |
//! | capture | [`Stream::begin_capture`], [`Stream::end_capture`], [`Stream::capture`], [`Stream::is_capturing`], [`Stream::capture_status`] |
//! | teardown | [`Stream::close`], `Drop` |

mod attach;
mod attribute;
mod capture;
mod copy;
mod host_fn;
mod memop;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::context::{Context, CudaContext};
use crate::device::Device;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::event::{Event, EventFlags};
use crate::host::{HostContext, HostStream, StreamOptions};
use crate::memory::alloc::KeepAlive;
use crate::sys::{self, CUresult};

pub use attribute::{
    AccessPolicyWindow, AccessProperty, StreamAttribute, StreamAttributeId, SyncPolicy,
};
pub use capture::{CaptureMode, CaptureStatus, exchange_thread_capture_mode};
pub use memop::{MemOp, WaitCondition};

/// Stream creation flags.
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

/// A CUDA stream: work enqueued on it runs in order; work on different streams may overlap
/// unless ordered by events.
///
/// `Stream` is `Send + Sync`: CUDA allows enqueueing on one stream from several threads
/// (each call is atomic; the interleaving between threads is up to them).
pub struct Stream {
    ctx: Context,
    raw: sys::CUstream,
    /// `false` for a foreign stream borrowed through [`Stream::from_handle`].
    owned: bool,
    /// The driver's process-unique id (`cuStreamGetId`), read once at creation.
    id: u64,
    /// The id of the capture this stream takes part in (0: none), kept by our own
    /// begin/end/wait calls so that hot paths need no driver query. Captures that foreign
    /// code starts on a borrowed handle are not seen here.
    pub(crate) capture: Arc<AtomicU64>,
    /// Panics caught in host functions, reported at the next `synchronize`.
    pub(crate) panics: Arc<Mutex<Vec<String>>>,
    /// A reusable event for [`Stream::wait`]: re-recording is fine, since a wait captures
    /// the event's state at the time it is enqueued.
    join_event: OnceLock<Event>,
    /// The CPU queue on the host backend (`raw` is then null and never used).
    pub(crate) host: Option<HostStream>,
}

// SAFETY: a CUstream may be used from any thread of the process once its context is current,
// which every method ensures.
unsafe impl Send for Stream {}
// SAFETY: all methods take `&self` and map to driver calls that are thread-safe per stream.
unsafe impl Sync for Stream {}

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
        if let Some(host) = ctx.host_context() {
            return Stream::host(ctx, host, flags, host.priority_range().0);
        }
        let c = ctx.bound_cuda("Stream::with_flags")?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the context is current.
        check("cuStreamCreate", unsafe {
            (c.driver.cuStreamCreate)(&mut raw, flags.raw())
        })?;
        Stream::wrap(ctx, raw, true)
    }

    /// A stream with a priority. Lower numbers are more urgent; values outside
    /// [`Context::stream_priority_range`] are clamped by the driver, and [`Stream::priority`]
    /// reads back the clamped value.
    pub fn with_priority(ctx: &Context, flags: StreamFlags, priority: i32) -> Result<Stream> {
        if let Some(host) = ctx.host_context() {
            return Stream::host(ctx, host, flags, priority);
        }
        let c = ctx.bound_cuda("Stream::with_priority")?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the context is current; the driver clamps the priority.
        check("cuStreamCreateWithPriority", unsafe {
            (c.driver.cuStreamCreateWithPriority)(&mut raw, flags.raw(), priority)
        })?;
        Stream::wrap(ctx, raw, true)
    }

    /// Borrows a stream created by another library. It is not destroyed on drop.
    ///
    /// # Safety
    /// `raw` must be a valid stream of `ctx`'s context (or the NULL/legacy stream) and stay
    /// valid for as long as the returned `Stream` (and anything enqueued through it that
    /// refers to it) is alive.
    pub unsafe fn from_handle(ctx: &Context, raw: sys::CUstream) -> Result<Stream> {
        Stream::wrap(ctx, raw, false)
    }

    /// A host-backend stream: an in-order queue on its own worker thread. Priorities are
    /// clamped and readable, and scheduling by them is best effort.
    fn host(
        ctx: &Context,
        host: &HostContext,
        flags: StreamFlags,
        priority: i32,
    ) -> Result<Stream> {
        let options = StreamOptions {
            name: None,
            priority,
            non_blocking: flags.non_blocking,
        };
        let queue = host.create_stream(options)?;
        let mut stream = Stream::empty(ctx, std::ptr::null_mut(), true);
        stream.id = queue.id();
        stream.host = Some(queue);
        Ok(stream)
    }

    fn empty(ctx: &Context, raw: sys::CUstream, owned: bool) -> Stream {
        Stream {
            ctx: ctx.clone(),
            raw,
            owned,
            id: 0,
            capture: Arc::new(AtomicU64::new(0)),
            panics: Arc::new(Mutex::new(Vec::new())),
            join_event: OnceLock::new(),
            host: None,
        }
    }

    fn wrap(ctx: &Context, raw: sys::CUstream, owned: bool) -> Result<Stream> {
        let mut stream = Stream::empty(ctx, raw, owned);
        // On failure `stream` drops and destroys an owned handle, so nothing leaks.
        let (c, raw) = stream.cuda("Stream::id")?;
        let mut id = 0;
        // SAFETY: a valid out-pointer; `raw` is live (ours, or vouched for by the caller).
        check("cuStreamGetId", unsafe {
            (c.driver.cuStreamGetId)(raw, &mut id)
        })?;
        stream.id = id;
        Ok(stream)
    }

    /// The bound CUDA context and this stream's handle, for the methods below.
    #[inline]
    pub(crate) fn cuda(&self, call: &'static str) -> Result<(&CudaContext, sys::CUstream)> {
        Ok((self.ctx.bound_cuda(call)?, self.raw))
    }

    /// The raw handle, for interop with other CUDA libraries. It stays owned by this `Stream`.
    /// Null on the host backend.
    pub fn handle(&self) -> sys::CUstream {
        self.raw
    }

    /// The context the stream belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Whether this stream was borrowed with [`Stream::from_handle`].
    pub fn is_borrowed(&self) -> bool {
        !self.owned
    }

    /// The creation flags, as the driver reports them.
    pub fn flags(&self) -> Result<StreamFlags> {
        if let Some(h) = &self.host {
            return Ok(StreamFlags {
                non_blocking: h.is_non_blocking(),
            });
        }
        let (c, raw) = self.cuda("Stream::flags")?;
        let mut flags = 0;
        // SAFETY: a valid out-pointer and live stream.
        check("cuStreamGetFlags", unsafe {
            (c.driver.cuStreamGetFlags)(raw, &mut flags)
        })?;
        Ok(StreamFlags::from_raw(flags))
    }

    /// Whether the stream does not synchronize with the legacy default stream.
    pub fn is_nonblocking(&self) -> Result<bool> {
        Ok(self.flags()?.non_blocking)
    }

    /// The priority, after the driver's clamping.
    pub fn priority(&self) -> Result<i32> {
        if let Some(h) = &self.host {
            return Ok(h.priority());
        }
        let (c, raw) = self.cuda("Stream::priority")?;
        let mut priority = 0;
        // SAFETY: a valid out-pointer and live stream.
        check("cuStreamGetPriority", unsafe {
            (c.driver.cuStreamGetPriority)(raw, &mut priority)
        })?;
        Ok(priority)
    }

    /// The driver's process-unique id for this stream (`cuStreamGetId`), never reused.
    pub fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn unique_id(&self) -> u64 {
        self.id
    }

    /// The capture this stream takes part in, as our own calls tracked it (no driver call).
    #[inline]
    pub(crate) fn tracked_capture(&self) -> Option<u64> {
        match self.capture.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Keeps `object` alive for as long as the graph being captured on this stream, if any:
    /// every enqueue that bakes a pointer into a graph node calls this.
    pub(crate) fn keep_alive_in_capture(&self, object: impl FnOnce() -> KeepAlive) {
        if let Some(id) = self.tracked_capture() {
            capture::register_capture_keepalive(id, object());
        }
    }

    /// The device the stream runs on. Uses `cuStreamGetDevice` (CUDA 12.8) when the driver
    /// has it, and checks it against the context's device.
    pub fn device(&self) -> Result<Device> {
        let (c, raw) = self.cuda("Stream::device")?;
        if let Some(get_device) = c.driver.cuStreamGetDevice {
            let mut dev = 0;
            // SAFETY: a valid out-pointer and live stream.
            check("cuStreamGetDevice", unsafe { get_device(raw, &mut dev) })?;
            if dev != c.device.handle() {
                return Err(Error::invalid(
                    "Stream::device",
                    "the driver reports a device other than the stream's context's",
                ));
            }
        }
        Ok(c.device)
    }

    /// Whether all work enqueued so far has completed (`cuStreamQuery`).
    pub fn is_complete(&self) -> Result<bool> {
        if let Some(h) = &self.host {
            return Ok(h.query());
        }
        let (c, raw) = self.cuda("Stream::is_complete")?;
        // SAFETY: a live stream.
        match unsafe { (c.driver.cuStreamQuery)(raw) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuStreamQuery", code).map(|()| false),
        }
    }

    /// Blocks until all enqueued work has completed. Reports, in this order: a driver error
    /// (including an asynchronous fault of earlier work), then a panic caught in a host
    /// function enqueued on this stream since the last synchronize.
    pub fn synchronize(&self) -> Result<()> {
        if let Some(h) = &self.host {
            h.synchronize()?;
            return self.take_host_panic();
        }
        let (c, raw) = self.cuda("Stream::synchronize")?;
        // SAFETY: a live stream.
        check("cuStreamSynchronize", unsafe {
            (c.driver.cuStreamSynchronize)(raw)
        })?;
        self.take_host_panic()
    }

    /// Makes later work on this stream wait until `event`'s most recent record completes.
    /// Waiting on an event that was never recorded is a no-op, as in CUDA.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.same_context("Stream::wait_event", event.context())?;
        if let Some(h) = &self.host {
            return Ok(h.wait(event.host_event()?)?);
        }
        let (c, raw) = self.cuda("Stream::wait_event")?;
        // SAFETY: a live stream and live event of the same context.
        check("cuStreamWaitEvent", unsafe {
            (c.driver.cuStreamWaitEvent)(raw, event.handle(), sys::CU_EVENT_WAIT_DEFAULT)
        })?;
        // Waiting on an event recorded inside a capture joins this stream to it.
        if let Some(id) = event.recorded_in_capture() {
            capture::track_join(id, &self.capture);
        }
        Ok(())
    }

    /// Makes later work on this stream wait for all work enqueued on `other` so far.
    pub fn wait(&self, other: &Stream) -> Result<()> {
        if let (Some(h), Some(other_host)) = (&self.host, &other.host) {
            self.same_context("Stream::wait", other.context())?;
            return Ok(h.wait_stream(other_host)?);
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

    /// Records a new event at the current end of this stream.
    pub fn record(&self) -> Result<Event> {
        let event = Event::new(&self.ctx)?;
        self.record_into(&event)?;
        Ok(event)
    }

    /// Records `event` at the current end of this stream (re-recording moves it).
    pub fn record_into(&self, event: &Event) -> Result<()> {
        self.same_context("Stream::record_into", event.context())?;
        if let Some(h) = &self.host {
            return Ok(h.record(event.host_event()?)?);
        }
        let (c, raw) = self.cuda("Stream::record_into")?;
        // SAFETY: a live stream and live event of the same context.
        check("cuEventRecord", unsafe {
            (c.driver.cuEventRecord)(event.handle(), raw)
        })?;
        event.set_recorded_in_capture(self.tracked_capture());
        Ok(())
    }

    /// Copies the attributes (access policy window, synchronization policy, ...) of `src`.
    pub fn copy_attributes_from(&self, src: &Stream) -> Result<()> {
        self.same_context("Stream::copy_attributes_from", src.context())?;
        let (c, raw) = self.cuda("Stream::copy_attributes_from")?;
        // SAFETY: two live streams of one context.
        check("cuStreamCopyAttributes", unsafe {
            (c.driver.cuStreamCopyAttributes)(raw, src.raw)
        })
    }

    /// Destroys the stream now and returns the driver's verdict, instead of logging it as
    /// `Drop` does. Work already enqueued still completes (the driver defers the release).
    pub fn close(mut self) -> Result<()> {
        let result = self.destroy();
        self.owned = false; // Drop must not destroy it again.
        result
    }

    fn destroy(&mut self) -> Result<()> {
        if !self.owned {
            return Ok(());
        }
        if let Some(h) = self.host.take() {
            // Dropping the queue runs what is queued and joins its worker.
            drop(h);
            return self.take_host_panic();
        }
        let (c, raw) = self.cuda("Stream::close")?;
        // SAFETY: we own the stream; the driver finishes enqueued work before releasing it.
        check("cuStreamDestroy", unsafe {
            (c.driver.cuStreamDestroy)(raw)
        })?;
        self.take_host_panic()
    }

    fn take_host_panic(&self) -> Result<()> {
        let mut panics = self.panics.lock().unwrap_or_else(|p| p.into_inner());
        if panics.is_empty() {
            return Ok(());
        }
        let message = panics.drain(..).collect::<Vec<_>>().join("; ");
        drop(panics);
        Err(Error::HostPanic {
            stream: self.id,
            message,
        })
    }

    fn same_context(&self, call: &'static str, other: &Context) -> Result<()> {
        if self.ctx.same_as(other) {
            Ok(())
        } else {
            Err(Error::invalid(
                call,
                "the stream and the event or stream belong to different contexts",
            ))
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(error = %e, "destroying a stream failed");
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.raw)
            .field("borrowed", &!self.owned)
            .finish()
    }
}
