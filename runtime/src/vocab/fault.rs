//! Faults of the host backend, each naming the stream, operation, event or buffer involved.
//!
//! Shared vocabulary (docs/DESIGN.md, "Layers"): the CPU backend raises them and `Error`
//! carries them, so they sit below both.

use std::fmt;
use std::sync::Arc;

use super::access::{Access, BufferId};

/// The kind of conflict between two unordered accesses to one buffer, named from the later one.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, Hazard, PinnedBuffer, Stream};
/// let ctx = Context::cpu_checked();
/// let (a, b) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
/// let mut field = DeviceBuffer::<u32>::alloc(&ctx, 8)?.named("field");
/// let mut out = PinnedBuffer::<u32>::zeros(&ctx, 8)?;
/// a.memset_u32(&mut field, 7)?;
/// b.copy_dtoh(&field, &mut out)?; // reads what `a` writes, with no event between them
/// assert!(ctx.synchronize().is_err());
/// assert_eq!(ctx.races()[0].hazard, Hazard::ReadAfterWrite);
/// assert_eq!(Hazard::ReadAfterWrite.to_string(), "read-after-write");
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hazard {
    /// The later access reads what the earlier one wrote.
    ReadAfterWrite,
    /// The later access overwrites what the earlier one read.
    WriteAfterRead,
    /// Both write.
    WriteAfterWrite,
}

impl Hazard {
    /// The hazard between an earlier and a later access, or `None` when both only read.
    pub(crate) fn between(earlier: Access, later: Access) -> Option<Hazard> {
        match (earlier, later) {
            (Access::Read, Access::Read) => None,
            (Access::Write, Access::Read) => Some(Hazard::ReadAfterWrite),
            (Access::Read, Access::Write) => Some(Hazard::WriteAfterRead),
            (Access::Write, Access::Write) => Some(Hazard::WriteAfterWrite),
        }
    }
}

impl fmt::Display for Hazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hazard::ReadAfterWrite => "read-after-write",
            Hazard::WriteAfterRead => "write-after-read",
            Hazard::WriteAfterWrite => "write-after-write",
        })
    }
}

/// One side of a race: an operation and the stream it ran on (`host` for host accesses).
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, Stream};
/// let ctx = Context::cpu_checked();
/// let (a, b) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
/// let mut x = DeviceBuffer::<u32>::alloc(&ctx, 8)?.named("x");
/// a.memset_u32(&mut x, 1)?;
/// b.memset_u32(&mut x, 2)?;
/// assert!(ctx.synchronize().is_err());
/// let race = &ctx.races()[0];
/// assert_ne!(race.earlier.stream, race.later.stream); // the two streams, by name
/// assert!(race.earlier.op.contains("memset"), "{}", race.earlier.op);
/// let (first, then) = (&race.earlier, &race.later);
/// println!("`{}` on `{}`, then `{}` on `{}`", first.op, first.stream, then.op, then.stream);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpSite {
    /// The operation's label.
    pub op: Arc<str>,
    /// The stream's name.
    pub stream: Arc<str>,
}

/// Two conflicting accesses to one buffer that no stream order, event or synchronize orders.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, Stream};
/// let ctx = Context::cpu_checked(); // the race detector
/// let (a, b) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
/// let mut field = DeviceBuffer::<u32>::alloc(&ctx, 16)?.named("field");
/// a.memset_u32(&mut field, 1)?;
/// b.memset_u32(&mut field, 2)?; // forgot `b.join(&a)?`
/// let err = ctx.synchronize().unwrap_err(); // the race surfaces at the next wait
/// assert!(err.to_string().contains("field"), "{err}");
/// let races = ctx.races();
/// assert_eq!(races.len(), 1);
/// assert_eq!(&*races[0].buffer_name, "field");
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceReport {
    /// The buffer both operations touch.
    pub(crate) buffer: BufferId,
    /// Its registered name.
    pub buffer_name: Arc<str>,
    /// What kind of conflict it is.
    pub hazard: Hazard,
    /// The operation enqueued (or captured) first.
    pub earlier: OpSite,
    /// The operation enqueued (or captured) later.
    pub later: OpSite,
}

impl fmt::Display for RaceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (verb, earlier_verb) = match self.hazard {
            Hazard::ReadAfterWrite => ("reads", "written by"),
            Hazard::WriteAfterRead => ("writes", "read by"),
            Hazard::WriteAfterWrite => ("writes", "also written by"),
        };
        write!(
            f,
            "{} race on `{}`: `{}` on stream `{}` {verb} it, {earlier_verb} `{}` on stream `{}`, \
             and no stream order, event or synchronize orders them; record an event after `{}` \
             and wait on it before `{}`, or synchronize stream `{}` before `{}` is enqueued",
            self.hazard,
            self.buffer_name,
            self.later.op,
            self.later.stream,
            self.earlier.op,
            self.earlier.stream,
            self.earlier.op,
            self.later.op,
            self.earlier.stream,
            self.later.op,
        )
    }
}

/// Everything the host backend can report. The crate's `Error` wraps it.
///
/// ```
/// use gpu_pipeline::{Context, CpuFault, Error, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let err = stream.end_capture().unwrap_err(); // no capture was begun
/// let Error::Cpu(CpuFault::NotCapturing { stream }) = &err else { panic!("{err}") };
/// assert!(err.to_string().contains(&**stream), "{err}");
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
#[allow(
    missing_docs,
    reason = "the variants' fields are named for what they hold"
)]
pub enum CpuFault {
    /// An operation's work returned an error. `stage`: the pipeline stage that enqueued (or
    /// captured) it, if one did.
    #[error("`{op}`{} on stream `{stream}` failed: {message}", of_stage(*stage))]
    OpFailed {
        stream: Arc<str>,
        op: Arc<str>,
        stage: Option<&'static str>,
        message: String,
    },
    /// A communication group's operation failed or missed its deadline: the typed failure,
    /// which the crate's `Error` reports as `Error::Communication`.
    #[error("`{op}` on stream `{stream}` failed: {failure}")]
    Communication {
        stream: Arc<str>,
        op: Arc<str>,
        failure: Box<crate::collective::CommFailure>,
    },
    /// An operation's work panicked; the panic was caught on the stream's thread. `stage`:
    /// the pipeline stage that enqueued (or captured) it, if one did. A kernel's panic is its
    /// CPU implementation's (an index past a slice's end, say): fix that function.
    #[error("`{op}`{} on stream `{stream}` panicked: {message}{}", of_stage(*stage), kernel_hint(op))]
    OpPanicked {
        stream: Arc<str>,
        op: Arc<str>,
        stage: Option<&'static str>,
        message: String,
    },
    /// The race detector found two unordered conflicting accesses.
    #[error("{0}")]
    Race(Box<RaceReport>),
    /// A one-shot host function was enqueued on a capturing stream.
    #[error(
        "`{op}` on stream `{stream}` is a one-shot host function and cannot be captured: every \
         replay of the graph would run it again; enqueue replayable work instead"
    )]
    OneShotInCapture { stream: Arc<str>, op: Arc<str> },
    /// `begin_capture` on a stream that is already capturing (or joined a capture).
    #[error("stream `{stream}` is already capturing")]
    AlreadyCapturing { stream: Arc<str> },
    /// `end_capture` on a stream that is not capturing.
    #[error("stream `{stream}` is not capturing")]
    NotCapturing { stream: Arc<str> },
    /// `end_capture` on a stream that joined a capture begun elsewhere.
    #[error(
        "stream `{stream}` joined the capture begun on `{origin}`; end the capture on `{origin}`"
    )]
    NotCaptureOrigin { stream: Arc<str>, origin: Arc<str> },
    /// The capture ended while forked streams had work the origin stream never waited on.
    #[error(
        "capture begun on `{origin}` ended with unjoined work on {}: record an event on each \
         after its last captured work and make `{origin}` wait on it before ending the capture",
        list_streams(.unjoined)
    )]
    CaptureUnjoined {
        origin: Arc<str>,
        unjoined: Vec<Arc<str>>,
    },
    /// An illegal operation during the capture invalidated it.
    #[error("capture begun on `{origin}` was invalidated: {reason}")]
    CaptureInvalidated {
        origin: Arc<str>,
        reason: Box<CpuFault>,
    },
    /// A capturing stream waited on an event recorded outside its capture.
    #[error(
        "stream `{stream}` is capturing and cannot wait on event `{event}`, which was recorded \
         {where_recorded}; only events recorded inside the same capture can be waited on"
    )]
    CaptureIsolation {
        stream: Arc<str>,
        event: Arc<str>,
        where_recorded: &'static str,
    },
    /// A blocking or eager-only call on a capturing stream.
    #[error("`{operation}` is not allowed on stream `{stream}` while it is capturing")]
    NotAllowedInCapture {
        stream: Arc<str>,
        operation: &'static str,
    },
    /// A stream taking part in a capture was dropped before the capture ended.
    #[error("stream `{stream}` was dropped while capturing")]
    DroppedDuringCapture { stream: Arc<str> },
    /// Work enqueued from inside a host function or a CPU kernel, where CUDA allows no driver
    /// call.
    #[error(
        "work was enqueued on stream `{stream}` from inside a host function or a kernel's CPU \
         implementation; CUDA refuses driver calls there (a host function must not call \
         CUDA), so enqueue it from the host thread, after the stream's work or in a step of \
         its own"
    )]
    EnqueueInsideOp { stream: Arc<str> },
    /// A blocking call from inside a stream operation, which could wait on itself forever.
    #[error(
        "`{operation}` was called from inside an operation running on a host stream; blocking \
         there can deadlock, so host work must not synchronize"
    )]
    BlockingCallInsideOp { operation: &'static str },
    /// A wait on a signal whose matching post no rank enqueued within the deadline.
    #[error(
        "signal `{signal}` was never posted within {deadline:?}: the rank that writes it \
         stopped, or never signals it (each wait needs one post)"
    )]
    SignalNeverPosted {
        signal: Arc<str>,
        deadline: std::time::Duration,
    },
    /// An event of another context.
    #[error("event `{event}` belongs to another context than stream `{stream}`")]
    ForeignEvent { stream: Arc<str>, event: Arc<str> },
    /// The event was last recorded inside a capture, so it has no point in eager execution.
    #[error("`{operation}` on event `{event}`, which was last recorded inside a stream capture")]
    EventInCapture {
        event: Arc<str>,
        operation: &'static str,
    },
    /// `elapsed_time` with an event that was never recorded.
    #[error("event `{event}` was never recorded")]
    EventNotRecorded { event: Arc<str> },
    /// `elapsed_time` with an event whose recorded point has not executed yet.
    #[error("event `{event}` has not completed yet")]
    EventNotReady { event: Arc<str> },
    /// `elapsed_time` with an event created without timing.
    #[error("event `{event}` was created with timing disabled")]
    EventTimingDisabled { event: Arc<str> },
    /// A graph node index past the end.
    #[error("graph has {count} nodes; there is no node {index}")]
    NodeOutOfRange { index: usize, count: usize },
    /// Kernel arguments set on a node that is not a kernel.
    #[error("graph node {index} (`{label}`) is not a kernel node")]
    NotAKernelNode { index: usize, label: Arc<str> },
    /// A node or edge a graph being built cannot take.
    #[error("cannot build the graph: {reason}")]
    GraphBuild { reason: String },
    /// A whole-graph update whose topology differs from the instantiated graph.
    #[error("cannot update the executable graph: {reason}")]
    GraphTopologyMismatch { reason: String },
    /// A host function panicked; the panic was caught on the stream that ran it. `stage`:
    /// the pipeline stage that enqueued (or captured) it, if one did.
    #[error("a host function{} on stream `{stream}` panicked: {message}", of_stage(*stage))]
    HostFunctionPanicked {
        stream: Arc<str>,
        stream_id: u64,
        stage: Option<&'static str>,
        message: String,
    },
    /// Pinned memory whose work could not be fenced: the host may not touch it any more.
    #[error(
        "work touching `{buffer}` could not be fenced or awaited, so the host may not access it \
         any more"
    )]
    MemoryLost { buffer: Arc<str> },
    /// A host slice of memory that a host slice never dropped (`mem::forget`) still holds.
    #[error(
        "`{buffer}` is held by a host slice (`as_slice` / `as_mut_slice`) that was never \
         dropped, so it cannot be viewed again"
    )]
    ForgottenHostSlice { buffer: Arc<str> },
    /// A host slice of memory the host cannot reach (device memory).
    #[error("`{buffer}` is device memory, which the host cannot read or write directly")]
    NotHostAccessible { buffer: Arc<str> },
    /// A host view of memory that does not fit, or is not aligned for its element type.
    #[error("cannot view `{buffer}` from the host as {detail}")]
    BadHostView { buffer: Arc<str>, detail: String },
    /// The operating system refused a worker thread.
    #[error("cannot start the worker thread of stream `{stream}`: {message}")]
    WorkerSpawn { stream: Arc<str>, message: String },
}

impl CpuFault {
    /// The fault for a failed operation on `stream` (whose id is `stream_id`).
    pub(crate) fn from_failure(
        stream: &Arc<str>,
        stream_id: u64,
        (op, stage): (&str, Option<&'static str>),
        host_function: bool,
        failure: OpFailure,
    ) -> Self {
        let (stream, op) = (stream.clone(), Arc::from(op));
        match failure {
            // A node inside a body fails as itself.
            OpFailure::Within {
                label,
                stage,
                host_function,
                failure,
            } => Self::from_failure(&stream, stream_id, (&label, stage), host_function, *failure),
            OpFailure::Panicked(message) if host_function => CpuFault::HostFunctionPanicked {
                stream,
                stream_id,
                stage,
                message,
            },
            OpFailure::Failed(message) => CpuFault::OpFailed {
                stream,
                op,
                stage,
                message,
            },
            OpFailure::Communication(failure) => CpuFault::Communication {
                stream,
                op,
                failure,
            },
            OpFailure::Panicked(message) => CpuFault::OpPanicked {
                stream,
                op,
                stage,
                message,
            },
        }
    }

    /// The pipeline stage whose operation failed or panicked, when a stage enqueued it.
    pub fn stage(&self) -> Option<&'static str> {
        match self {
            CpuFault::OpFailed { stage, .. }
            | CpuFault::OpPanicked { stage, .. }
            | CpuFault::HostFunctionPanicked { stage, .. } => *stage,
            _ => None,
        }
    }

    /// The race report, when this fault is one.
    pub fn as_race(&self) -> Option<&RaceReport> {
        match self {
            CpuFault::Race(report) => Some(report),
            _ => None,
        }
    }
}

/// ` of stage `name`` for a fault's op that a pipeline stage enqueued, nothing otherwise.
fn of_stage(stage: Option<&'static str>) -> String {
    stage.map_or_else(String::new, |stage| format!(" of stage `{stage}`"))
}

/// What to do about a panicked kernel launch: its CPU implementation panicked.
fn kernel_hint(op: &str) -> &'static str {
    if op.starts_with("launch ") {
        " (the kernel's CPU implementation panicked: index each buffer only below the bound \
         the CUDA kernel checks, as the kernel does)"
    } else {
        ""
    }
}

fn list_streams(streams: &[Arc<str>]) -> String {
    let names: Vec<String> = streams.iter().map(|s| format!("`{s}`")).collect();
    names.join(", ")
}

/// Why an operation did not complete.
#[derive(Debug)]
pub(crate) enum OpFailure {
    /// The work returned an error message.
    Failed(String),
    /// The work panicked; the panic message.
    Panicked(String),
    /// A communication group failed (the CPU backend's `cpu::op::communication_failed` says how).
    Communication(Box<crate::collective::CommFailure>),
    /// A node inside a conditional node's body or a child graph failed: the fault names that
    /// node (its label, stage and kind), not the conditional or child graph around it.
    Within {
        /// The failed node's label (`launch k::sweep`).
        label: std::sync::Arc<str>,
        /// The pipeline stage that built it.
        stage: Option<&'static str>,
        /// Whether it is a host function.
        host_function: bool,
        /// How it failed (never `Within` itself: the innermost node is kept).
        failure: Box<OpFailure>,
    },
}
