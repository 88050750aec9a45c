//! The stream a pipeline's `call` statement receives: typed by the marker of the pipeline
//! stream it is, and offering only the operations a CUDA graph capture can record.
//!
//! A step is captured once and replayed, so a function called from a stage must not block
//! the host (`synchronize`, a blocking copy), query the stream, or wait on an event from
//! outside the step: inside a capture each of those fails at run time, when `capture()` is
//! called. [`TypedStream`] therefore has no way back to the full [`Stream`]; what it offers
//! (kernel launches, asynchronous copies and memsets, flag waits and writes, repeatable host
//! functions, and the raw handle for other CUDA libraries) is what a captured graph replays.

use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::launch::{KernelArgsFor, LaunchConfig, Signature, TypedKernel};
use crate::memory::{DeviceDest, DeviceSource, FlagCell, PinnedDest, PinnedSource};
use crate::stream::{Stream, StreamFlags, WaitCondition};
use crate::sys;

/// A declared stream priority, resolved against the context's range when the stream is made.
///
/// In `gpu_pipeline!` it is a stream's `priority = high` (or `low`, `default`, a number);
/// resolved by hand:
///
/// ```
/// use gpu_pipeline::{Context, Stream, StreamFlags, StreamPriority};
/// let ctx = Context::cpu();
/// let range = ctx.stream_priority_range()?;
/// assert_eq!(StreamPriority::High.resolve(&ctx)?, range.greatest);
/// assert_eq!(StreamPriority::Default.resolve(&ctx)?, range.least);
/// assert_eq!(StreamPriority::Value(-1000).resolve(&ctx)?, range.greatest); // clamped
/// let high = StreamPriority::High.resolve(&ctx)?;
/// let urgent = Stream::with_priority(&ctx, StreamFlags::default(), high)?;
/// assert_eq!(urgent.priority()?, range.greatest);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamPriority {
    /// The most urgent priority the context allows.
    High,
    /// The least urgent (also CUDA's default).
    Low,
    /// CUDA's default, which is the least urgent.
    Default,
    /// A value, clamped to the context's range as the driver does.
    Value(i32),
}

impl StreamPriority {
    /// The priority number for a context whose range is `(least, greatest)`.
    pub fn resolve(self, ctx: &Context) -> Result<i32> {
        let range = ctx.stream_priority_range()?;
        Ok(match self {
            StreamPriority::High => range.greatest,
            StreamPriority::Low | StreamPriority::Default => range.least,
            StreamPriority::Value(v) => range.clamp(v),
        })
    }

    /// Creates a stream with this priority, named `name` in the CPU backend's reports.
    /// Generated pipelines call this for each stream.
    #[doc(hidden)]
    pub fn new_stream(self, ctx: &Context, non_blocking: bool, name: String) -> Result<Stream> {
        let flags = StreamFlags { non_blocking };
        Stream::create(ctx, flags, Some(self.resolve(ctx)?), Some(name))
    }
}

/// One stream of a pipeline, as a `call` statement receives it: typed by the zero-sized
/// marker `M` of the pipeline stream it is, so a function written for one stream of one
/// pipeline cannot be called from another (a compile error, not a race), and limited to what
/// a captured graph can replay.
///
/// ```no_run
/// use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};
///
/// gpu_pipeline! {
///     pipeline Solver {
///         streams { blas }
///         params { x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
///         stage apply on blas { call duplicate(x, y) reads(x) writes(y); }
///     }
/// }
///
/// /// Enqueues `y = x` on the `blas` stream of a `Solver`.
/// fn duplicate(stream: &TypedStream<SolverBlas>, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
///     stream.copy_dtod(x, y)
/// }
/// # fn main() {}
/// ```
pub struct TypedStream<'s, M> {
    stream: &'s Stream,
    label: &'static str,
    _marker: PhantomData<fn() -> M>,
}

impl<'s, M> TypedStream<'s, M> {
    /// The stream `stream` of a pipeline, labelled `Pipeline.stream`. Generated code calls
    /// this for each `call` statement.
    #[doc(hidden)]
    pub fn new(stream: &'s Stream, label: &'static str) -> Self {
        TypedStream {
            stream,
            label,
            _marker: PhantomData,
        }
    }

    /// The stream, for the backends' interop code and one-sided windows' signals (not
    /// public: a called function must not get the full `Stream` back).
    pub(crate) fn stream(&self) -> &'s Stream {
        self.stream
    }

    /// `Pipeline.stream`, as declared.
    pub fn label(&self) -> &'static str {
        self.label
    }

    /// The context the stream belongs to.
    pub fn context(&self) -> &Context {
        self.stream.context()
    }

    /// The stream's id, unique within the process.
    pub fn id(&self) -> u64 {
        self.stream.id()
    }

    /// The raw `CUstream`, for other CUDA libraries (cuBLAS, NCCL, ...): what they enqueue on
    /// it is ordered like the stage's own work and captured with it. Their calls must be
    /// capturable too. `None` on the CPU backend.
    pub fn handle(&self) -> Option<sys::CUstream> {
        self.stream.handle()
    }

    /// Whether the stream is being captured into a graph (inside `capture()`), for libraries
    /// that need to know.
    pub fn is_capturing(&self) -> Result<bool> {
        self.stream.is_capturing()
    }

    /// Launches `kernel` on this stream ([`TypedKernel::launch`]). Inside a captured step
    /// the launch's kernel node is the called code's, as a library's would be: it is not one
    /// of the nodes the step's setters update.
    pub fn launch<Sig, A>(
        &self,
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()>
    where
        Sig: Signature + 'static,
        A: KernelArgsFor<Sig>,
    {
        crate::call_scope::as_called(|| kernel.launch(self.stream, config, args))
    }

    /// Copies pinned host memory to device memory ([`Stream::copy_htod`]).
    pub fn copy_htod<T: Pod>(
        &self,
        src: &impl PinnedSource<T>,
        dst: &mut impl DeviceDest<T>,
    ) -> Result<()> {
        self.stream.copy_htod(src, dst)
    }

    /// Copies device memory to pinned host memory ([`Stream::copy_dtoh`]).
    pub fn copy_dtoh<T: Pod>(
        &self,
        src: &impl DeviceSource<T>,
        dst: &mut impl PinnedDest<T>,
    ) -> Result<()> {
        self.stream.copy_dtoh(src, dst)
    }

    /// Copies device memory to device memory ([`Stream::copy_dtod`]).
    pub fn copy_dtod<T: Pod>(
        &self,
        src: &impl DeviceSource<T>,
        dst: &mut impl DeviceDest<T>,
    ) -> Result<()> {
        self.stream.copy_dtod(src, dst)
    }

    /// Sets every byte of `dst` to `value` ([`Stream::memset_u8`]).
    pub fn memset_u8<T: Pod>(&self, dst: &mut impl DeviceDest<T>, value: u8) -> Result<()> {
        self.stream.memset_u8(dst, value)
    }

    /// Sets every 32-bit word of `dst` to `value` ([`Stream::memset_u32`]).
    pub fn memset_u32<T: Pod>(&self, dst: &mut impl DeviceDest<T>, value: u32) -> Result<()> {
        self.stream.memset_u32(dst, value)
    }

    /// Writes `value` to `cell` once earlier work completes ([`Stream::write_value_32`]).
    pub fn write_value_32(&self, cell: &FlagCell<u32>, value: u32) -> Result<()> {
        self.stream.write_value_32(cell, value)
    }

    /// The 64-bit form of [`TypedStream::write_value_32`].
    pub fn write_value_64(&self, cell: &FlagCell<u64>, value: u64) -> Result<()> {
        self.stream.write_value_64(cell, value)
    }

    /// Makes later work wait until `cell` meets `condition` ([`Stream::wait_value_32`]).
    pub fn wait_value_32(
        &self,
        cell: &FlagCell<u32>,
        condition: WaitCondition,
        value: u32,
    ) -> Result<()> {
        self.stream.wait_value_32(cell, condition, value)
    }

    /// The 64-bit form of [`TypedStream::wait_value_32`].
    pub fn wait_value_64(
        &self,
        cell: &FlagCell<u64>,
        condition: WaitCondition,
        value: u64,
    ) -> Result<()> {
        self.stream.wait_value_64(cell, condition, value)
    }

    /// Enqueues a closure that runs on the host in stream order, at every run and every
    /// replay of a captured step ([`Stream::launch_host_fn`]).
    pub fn launch_host_fn(&self, f: Arc<dyn Fn() + Send + Sync>) -> Result<()> {
        self.stream.launch_host_fn(f)
    }
}

/// The stream operations a captured graph cannot record. [`TypedStream`] names them only so
/// that calling one is a compile error that says what to do instead; the error comes from
/// the `where` clause, which no type satisfies (the traits below have no implementations, and
/// the orphan rule keeps other crates from adding one).
impl<M> TypedStream<'_, M> {
    /// Not in a pipeline step: see the compile error.
    pub fn synchronize(&self) -> Result<()>
    where
        Self: NoSynchronize,
    {
        Err(not_capturable("synchronize"))
    }

    /// Not in a pipeline step: see the compile error.
    pub fn is_complete(&self) -> Result<bool>
    where
        Self: NoQuery,
    {
        Err(not_capturable("is_complete"))
    }

    /// Not in a pipeline step: see the compile error.
    pub fn wait_event(&self, event: &Event) -> Result<()>
    where
        Self: NoForeignEvent,
    {
        let _ = event;
        Err(not_capturable("wait_event"))
    }

    /// Not in a pipeline step: see the compile error.
    pub fn wait(&self, other: &Stream) -> Result<()>
    where
        Self: NoForeignEvent,
    {
        let _ = other;
        Err(not_capturable("wait"))
    }

    /// Not in a pipeline step: see the compile error.
    pub fn join(&self, other: &Stream) -> Result<()>
    where
        Self: NoForeignEvent,
    {
        let _ = other;
        Err(not_capturable("join"))
    }

    /// Not in a pipeline step: see the compile error.
    pub fn record(&self) -> Result<Event>
    where
        Self: NoHandWiredEvent,
    {
        Err(not_capturable("record"))
    }

    /// Not in a pipeline step: see the compile error.
    pub fn record_into(&self, event: &Event) -> Result<()>
    where
        Self: NoHandWiredEvent,
    {
        let _ = event;
        Err(not_capturable("record_into"))
    }
}

fn not_capturable(operation: &'static str) -> Error {
    Error::invalid(
        "TypedStream",
        format!("`{operation}` cannot be captured in a pipeline step"),
    )
}

/// See [`TypedStream::synchronize`].
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a function called from a pipeline stage cannot `synchronize` its stream",
    label = "blocks the host, which a captured CUDA graph cannot replay",
    note = "a step is captured once and replayed: the function only enqueues work, and the host \
            waits for the whole step outside the pipeline (`run(...)?.wait()`, \
            `graph.synchronize()`)"
)]
pub trait NoSynchronize {}

/// See [`TypedStream::is_complete`].
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a function called from a pipeline stage cannot query its stream",
    label = "a stream query fails while the stream is being captured",
    note = "ask the step instead: `PRun::is_complete` on an eager run"
)]
pub trait NoQuery {}

/// See [`TypedStream::wait_event`].
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a function called from a pipeline stage cannot wait on an event or a stream from outside the step",
    label = "a captured CUDA graph cannot wait on work outside it",
    note = "the macro orders the stages from their accesses: list what the function reads and \
            writes in `reads(...)`/`writes(...)`, add `after STAGE` for an order no access \
            implies, or wait on a `FlagCell` param with a `wait` statement"
)]
pub trait NoForeignEvent {}

/// See [`TypedStream::record`].
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a function called from a pipeline stage cannot record events by hand",
    label = "the macro records every event a step needs",
    note = "the macro derives every event from the stages' accesses: list what the function \
            reads and writes in `reads(...)`/`writes(...)`, and add `after STAGE` for an order \
            no access implies"
)]
pub trait NoHandWiredEvent {}

impl<M> Clone for TypedStream<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for TypedStream<'_, M> {}

impl<M> std::fmt::Debug for TypedStream<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedStream")
            .field("label", &self.label)
            .field("stream", &self.stream)
            .finish()
    }
}
