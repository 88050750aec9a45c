//! Operations: what a stream runs, which buffers it touches, and whether it can be replayed.

use std::any::Any;
use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use super::clock::VectorClock;
use super::memory::{Held, Memory};
use super::shared::current_launch;
use crate::collective::CommFailure;
use crate::launch::config::LaunchConfig;
use crate::panic_log::panic_message;
#[cfg(test)]
use crate::vocab::access::BufferId;
use crate::vocab::access::{Access, Span, Touch, merge_accesses};
use crate::vocab::fault::OpFailure;

/// A buffer argument of a kernel: the memory, the byte range, and how the kernel uses it.
#[derive(Clone, Debug)]
pub(crate) struct BufferArg {
    /// The allocation (kept alive by the argument).
    pub(crate) memory: Arc<Memory>,
    /// Bytes from its start.
    pub(crate) offset: usize,
    /// Length in bytes.
    pub(crate) byte_len: usize,
    /// Size of one element in bytes.
    pub(crate) elem_size: usize,
    /// Whether the kernel may write through this argument.
    pub(crate) writable: bool,
}

impl PartialEq for BufferArg {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.memory, &other.memory)
            && (self.offset, self.byte_len, self.elem_size, self.writable)
                == (
                    other.offset,
                    other.byte_len,
                    other.elem_size,
                    other.writable,
                )
    }
}

impl Eq for BufferArg {}

/// One kernel argument, as a graph's kernel node stores it and as "set params" replaces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KernelArgValue {
    /// A by-value argument: the bytes of a plain-old-data value.
    Scalar(Box<[u8]>),
    /// A buffer argument.
    Buffer(BufferArg),
}

impl KernelArgValue {
    /// A scalar argument holding `value`'s bytes.
    #[cfg(test)]
    pub(crate) fn scalar<T: bytemuck::Pod>(value: T) -> Self {
        KernelArgValue::Scalar(bytemuck::bytes_of(&value).into())
    }

    /// The scalar as a `T`, or `None` for a buffer or a scalar of another size.
    #[cfg(test)]
    pub(crate) fn as_scalar<T: bytemuck::Pod>(&self) -> Option<T> {
        match self {
            KernelArgValue::Scalar(bytes) => bytemuck::try_pod_read_unaligned(bytes).ok(),
            KernelArgValue::Buffer(_) => None,
        }
    }

    /// The buffer argument, or `None` for a scalar.
    pub(crate) fn as_buffer(&self) -> Option<&BufferArg> {
        match self {
            KernelArgValue::Buffer(arg) => Some(arg),
            KernelArgValue::Scalar(_) => None,
        }
    }

    /// The access a buffer argument implies (its bytes only); scalars touch no buffer.
    fn access(&self) -> Option<Touch> {
        let arg = self.as_buffer()?;
        let access = if arg.writable {
            Access::Write
        } else {
            Access::Read
        };
        Some((
            arg.memory.id(),
            access,
            Span::bytes(arg.offset, arg.byte_len),
        ))
    }
}

/// Replayable host work: runs once per execution, including every graph replay.
pub(crate) type Work = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;
/// A kernel's host implementation, called with the launch's geometry and the current
/// arguments.
pub(crate) type KernelFn =
    Arc<dyn Fn(&LaunchConfig, &[KernelArgValue]) -> Result<(), String> + Send + Sync>;
/// One-shot host work (a host function); it cannot be captured.
pub(crate) type OnceWork = Box<dyn FnOnce() -> Result<(), String> + Send>;
/// What a graph's launch does for one of its nodes when the launch is enqueued (not when it
/// runs), in stream order: a communication group takes its place in its rank's issue order
/// there, as an eager one does when it is enqueued; an event record node records its event
/// there, and a wait node picks the record it waits for. A node holds it as a
/// [`Keep::Object`]. Nodes of a conditional node's bodies, which run any number of times per
/// launch, have none (see `Graph::seal_conditional`).
pub(crate) struct OnLaunch(pub(crate) Arc<dyn LaunchHook>);

/// The moments of a launch a node may act at (see [`OnLaunch`]). `launch` numbers the
/// launch; while its replay runs, `shared::current_launch()` says which it is, so a node's run
/// takes what its hook queued for that launch and no other.
pub(crate) trait LaunchHook: Send + Sync + fmt::Debug {
    /// As the launch is enqueued, before its accesses are checked: clocks the launch is
    /// ordered after (a wait node's event, in checked mode) go into `joins`.
    fn before(&self, _joins: &mut Vec<VectorClock>, _launch: u64) {}
    /// As the launch is enqueued, after: `clock` is the stream's clock with the launch in it
    /// (checked mode).
    fn after(&self, _clock: Option<&VectorClock>, _launch: u64) {}
    /// The replay of `launch` has run (or was dropped): what its runs did not take goes.
    fn end(&self, _launch: u64) {}
}

/// What a node's [`LaunchHook`] queued for each launch, until that launch's replay takes it
/// (a communication group's ticket, an event node's record point).
#[derive(Debug)]
pub(crate) struct PerLaunch<T>(std::sync::Mutex<std::collections::VecDeque<(u64, T)>>);

impl<T> Default for PerLaunch<T> {
    fn default() -> Self {
        PerLaunch(Default::default())
    }
}

impl<T> PerLaunch<T> {
    fn queue(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(u64, T)>> {
        // A queue of owned values, consistent after every change.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `item` for `launch`.
    pub(crate) fn push(&self, launch: u64, item: T) {
        self.queue().push_back((launch, item));
    }

    /// What the launch whose replay runs on this thread queued (the oldest, if it queued
    /// several); `None` outside a replay or when it queued nothing left.
    pub(crate) fn take(&self) -> Option<T> {
        let launch = current_launch()?;
        let mut queue = self.queue();
        let at = queue.iter().position(|(l, _)| *l == launch)?;
        queue.remove(at).map(|(_, item)| item)
    }

    /// What `launch` queued and its replay did not take, handed back so that the caller
    /// drops or completes it outside the lock.
    pub(crate) fn leftover(&self, launch: u64) -> Vec<T> {
        let mut queue = self.queue();
        let (mine, others): (std::collections::VecDeque<_>, _) =
            queue.drain(..).partition(|(l, _)| *l == launch);
        *queue = others;
        mine.into_iter().map(|(_, item)| item).collect()
    }
}

impl OnLaunch {
    /// The hooks `keep` holds.
    pub(crate) fn of(keep: &[Keep]) -> impl Iterator<Item = &OnLaunch> {
        keep.iter().filter_map(|k| match k {
            Keep::Object(o) => o.downcast_ref::<OnLaunch>(),
            Keep::Memory(_) => None,
        })
    }
}

/// Something a graph node keeps alive for the graph's whole life, and that the graph's
/// launches look at.
#[derive(Clone)]
pub(crate) enum Keep {
    /// Memory the node touches: pinned and managed memory gate launches.
    Memory(Held),
    /// Anything else the node needs alive (its kernel's module); held, never looked into.
    Object(Arc<dyn Any + Send + Sync>),
}

impl Keep {
    /// The identity of what is kept, for de-duplication.
    pub(crate) fn key(&self) -> usize {
        match self {
            Keep::Memory(m) => Arc::as_ptr(m.memory()) as *const () as usize,
            Keep::Object(o) => Arc::as_ptr(o) as *const () as usize,
        }
    }
}

impl fmt::Debug for Keep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keep::Memory(m) => f.debug_tuple("Memory").field(&m.memory().name()).finish(),
            Keep::Object(_) => f.write_str("Object"),
        }
    }
}

/// What kind of graph node an operation becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeKind {
    /// A kernel launch.
    Kernel,
    /// A copy.
    Memcpy,
    /// A memset.
    Memset,
    /// Host work (host functions, stream memory operations).
    Host,
    /// Nothing: a join point of a graph built node by node.
    Empty,
    /// A child graph.
    Graph,
    /// An event record.
    EventRecord,
    /// An event wait.
    EventWait,
    /// A device-side `while` or `if` with its body graph.
    Conditional,
}

/// Which kernel a kernel operation launches, and how: what a graph's kernel nodes report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelTag {
    /// The kernel's process-unique id.
    pub(crate) kernel: u64,
    /// The launch's geometry.
    pub(crate) config: LaunchConfig,
    /// Launched by code a pipeline's `call` ran (see `call_scope`): not one of the step's
    /// own launches.
    pub(crate) in_call: bool,
}

/// What an operation does when it runs.
pub(super) enum OpWork {
    Replayable(Work),
    Kernel {
        func: KernelFn,
        args: Vec<KernelArgValue>,
    },
    Once(OnceWork),
}

/// What names an operation that failed: its label, the stage that enqueued it, and whether
/// it was a host function.
pub(crate) struct Failed {
    pub(crate) label: Cow<'static, str>,
    pub(crate) stage: Option<&'static str>,
    pub(crate) host_function: bool,
}

/// One unit of stream work: a label for reports, the buffers it declares, and the work.
///
/// ```ignore
/// let op = Op::replayable("copy next -> snapshot", move || copy(&next, &snapshot))
///     .reads(next_id)
///     .writes(snapshot_id);
/// stream.enqueue(op)?;
/// ```
pub(crate) struct Op {
    pub(super) label: Cow<'static, str>,
    pub(super) accesses: Vec<Touch>,
    pub(super) work: OpWork,
    pub(super) kind: NodeKind,
    pub(super) kernel: Option<KernelTag>,
    /// A host function: its panic is reported as one (`CpuFault::HostFunctionPanicked`).
    pub(super) host_function: bool,
    /// Kept only if the op is captured (then by its graph node); dropped at enqueue
    /// otherwise, outside the stream's lock. The work itself holds what it touches.
    pub(super) keep: Vec<Keep>,
    /// The pipeline stage that enqueued it (`stage.rs`), which its failure names.
    pub(super) stage: Option<&'static str>,
}

impl Op {
    /// Replayable work: may be captured into a graph and run once per replay.
    pub(crate) fn replayable(
        label: impl Into<Cow<'static, str>>,
        work: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        Self::with_work(label, OpWork::Replayable(Arc::new(work)))
    }

    /// A kernel launch: `func` runs with `args`; a captured kernel node can have its arguments
    /// replaced. Buffer arguments declare their own accesses (write when `writable`).
    pub(crate) fn kernel(
        label: impl Into<Cow<'static, str>>,
        func: KernelFn,
        args: Vec<KernelArgValue>,
        tag: KernelTag,
    ) -> Self {
        let keep = args
            .iter()
            .filter_map(KernelArgValue::as_buffer)
            .map(|b| Keep::Memory(Held::new(b.memory.clone())))
            .collect();
        let mut op = Self::with_work(label, OpWork::Kernel { func, args });
        op.kind = NodeKind::Kernel;
        op.kernel = Some(tag);
        op.keep = keep;
        op
    }

    /// A one-shot host function. Enqueuing it on a capturing stream is a fault, since a
    /// replayed graph would run it again.
    pub(crate) fn once(
        label: impl Into<Cow<'static, str>>,
        work: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> Self {
        Self::with_work(label, OpWork::Once(Box::new(work)))
    }

    fn with_work(label: impl Into<Cow<'static, str>>, work: OpWork) -> Self {
        Op {
            label: label.into(),
            accesses: Vec::new(),
            work,
            kind: NodeKind::Host,
            kernel: None,
            host_function: false,
            keep: Vec::new(),
            stage: super::stage::current(),
        }
    }

    /// Sets the kind of graph node the op becomes when captured.
    pub(crate) fn kind(mut self, kind: NodeKind) -> Self {
        self.kind = kind;
        self
    }

    /// Marks the op as a host function, whose panic is reported as a host function's.
    pub(crate) fn host_function(mut self) -> Self {
        self.host_function = true;
        self
    }

    /// Declares that the operation reads or writes the bytes `span` of `memory`, and keeps the
    /// memory alive in the graph node it may be captured into.
    pub(crate) fn touches_span(mut self, memory: &Arc<Memory>, access: Access, span: Span) -> Self {
        self.accesses.push((memory.id(), access, span));
        self.keep(Keep::Memory(Held::new(memory.clone())))
    }

    /// Declares that the operation reads `buffer`.
    #[cfg(test)]
    pub(crate) fn reads(self, buffer: BufferId) -> Self {
        self.access(buffer, Access::Read)
    }

    /// Declares that the operation writes `buffer`.
    #[cfg(test)]
    pub(crate) fn writes(self, buffer: BufferId) -> Self {
        self.access(buffer, Access::Write)
    }

    /// Declares an access to `buffer`.
    #[cfg(test)]
    pub(crate) fn access(mut self, buffer: BufferId, access: Access) -> Self {
        self.accesses.push((buffer, access, Span::ALL));
        self
    }

    /// Keeps `item` alive as long as the graph node the op is captured into (nothing, when
    /// the op runs eagerly: its work holds what it touches).
    pub(crate) fn keep(mut self, item: Keep) -> Self {
        self.keep.push(item);
        self
    }

    /// The memory the op touches (as its keep list names it).
    pub(crate) fn touched(&self) -> impl Iterator<Item = &Arc<Memory>> {
        Op::memories(&self.keep)
    }

    /// The memory a keep list names.
    pub(crate) fn memories(keep: &[Keep]) -> impl Iterator<Item = &Arc<Memory>> {
        keep.iter().filter_map(|k| match k {
            Keep::Memory(m) => Some(m.memory()),
            Keep::Object(_) => None,
        })
    }

    /// The label used in reports.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Whether this is a one-shot host function (not capturable).
    pub(crate) fn is_one_shot(&self) -> bool {
        matches!(self.work, OpWork::Once(_))
    }

    /// Declared accesses plus those implied by kernel buffer arguments, one per buffer span.
    pub(crate) fn effective_accesses(&self) -> Vec<Touch> {
        let args = match &self.work {
            OpWork::Kernel { args, .. } => args.as_slice(),
            OpWork::Replayable(_) | OpWork::Once(_) => &[],
        };
        effective_accesses(&self.accesses, args)
    }

    /// Runs the work, catching panics; on failure hands back what the report names: the
    /// label, the stage, and whether the op was a host function.
    pub(super) fn run(self) -> Result<(), (Failed, OpFailure)> {
        let Op {
            label,
            work,
            host_function,
            kernel,
            stage,
            ..
        } = self;
        // The work is moved into the guard so that its drop (user captures) is guarded too.
        let result = run_guarded(move || match work {
            OpWork::Replayable(f) => f(),
            OpWork::Kernel { func, args } => match kernel {
                Some(tag) => func(&tag.config, &args),
                // `Op::kernel` always tags the op.
                None => Err("a kernel operation without its launch geometry".to_owned()),
            },
            OpWork::Once(f) => f(),
        });
        result.map_err(|failure| {
            let failed = Failed {
                label,
                stage,
                host_function,
            };
            (failed, failure)
        })
    }
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.work {
            OpWork::Replayable(_) => "replayable",
            OpWork::Kernel { .. } => "kernel",
            OpWork::Once(_) => "once",
        };
        f.debug_struct("Op")
            .field("label", &self.label)
            .field("kind", &kind)
            .field("accesses", &self.accesses)
            .finish()
    }
}

/// Declared accesses merged with kernel-argument accesses: sorted, one entry per buffer span,
/// a write winning over a read.
pub(super) fn effective_accesses(declared: &[Touch], args: &[KernelArgValue]) -> Vec<Touch> {
    merge_accesses(
        declared
            .iter()
            .copied()
            .chain(args.iter().filter_map(KernelArgValue::access))
            .collect(),
    )
}

thread_local! {
    /// The typed failure of the communication work running on this worker thread, set by
    /// [`communication_failed`] right before the work returns its error.
    static COMMUNICATION: RefCell<Option<Box<CommFailure>>> = const { RefCell::new(None) };
}

/// The error a communication group's work returns for `failure`: its text, with the typed
/// failure kept aside on this worker thread for [`run_guarded`], so that the stream's fault
/// (and every wait that reports it) is [`CpuFault::Communication`](super::CpuFault), not
/// only its text. Call it on the thread running the work, as its last act.
pub(crate) fn communication_failed(failure: CommFailure) -> String {
    let text = failure.to_string();
    COMMUNICATION.with(|slot| *slot.borrow_mut() = Some(Box::new(failure)));
    text
}

/// Runs user work so that neither an error nor a panic escapes into the worker thread, not
/// even a panic payload that panics again when dropped (it is leaked instead).
pub(super) fn run_guarded(work: impl FnOnce() -> Result<(), String>) -> Result<(), OpFailure> {
    // Left by work that set it and then succeeded or panicked: not this work's.
    COMMUNICATION.with(|slot| slot.borrow_mut().take());
    let outcome = panic::catch_unwind(AssertUnwindSafe(work));
    let typed = COMMUNICATION.with(|slot| slot.borrow_mut().take());
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(match typed {
            Some(failure) => OpFailure::Communication(failure),
            None => OpFailure::Failed(message),
        }),
        Err(payload) => {
            let message = panic_message(payload.as_ref());
            if let Err(nested) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                std::mem::forget(nested);
            }
            Err(OpFailure::Panicked(message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_accesses_merge_with_write_winning() {
        let ctx = super::super::shared::ContextShared::new(false);
        let memory = Memory::new(&ctx, 16, super::super::memory::MemoryKind::Device).unwrap();
        let (a, b) = (memory.id(), BufferId::fresh());
        let arg = KernelArgValue::Buffer(BufferArg {
            memory,
            offset: 0,
            byte_len: 16,
            elem_size: 4,
            writable: true,
        });
        let whole = Span::bytes(0, 16);
        let merged = effective_accesses(
            &[(a, Access::Read, whole), (b, Access::Read, Span::ALL)],
            &[arg],
        );
        assert_eq!(
            merged,
            vec![(a, Access::Write, whole), (b, Access::Read, Span::ALL)]
        );
    }

    #[test]
    fn scalars_round_trip_and_check_size() {
        let arg = KernelArgValue::scalar(2.5f32);
        assert_eq!(arg.as_scalar::<f32>(), Some(2.5));
        assert_eq!(arg.as_scalar::<f64>(), None);
    }

    #[test]
    fn run_catches_errors_and_panics() {
        let failed = Op::replayable("fails", || Err("boom".into())).run();
        assert!(
            matches!(failed, Err((Failed { host_function: false, .. }, OpFailure::Failed(m))) if m == "boom")
        );
        let failure = crate::collective::CommFailure {
            rank: 0,
            pipeline: Some("P"),
            stage: Some("s"),
            operation: "send".to_owned(),
            peer: Some(1),
            deadline: std::time::Duration::from_secs(1),
            cause: crate::collective::CommCause::PeerGone { peer: 1 },
        };
        let expected = failure.clone();
        let typed =
            Op::replayable("sends", move || Err(communication_failed(failure.clone()))).run();
        assert!(
            matches!(typed, Err((Failed { host_function: false, .. }, OpFailure::Communication(f))) if *f == expected)
        );
        // The typed failure is this work's only: the next failing work is plain text.
        let failed = Op::replayable("fails", || Err("boom".into())).run();
        assert!(
            matches!(failed, Err((Failed { host_function: false, .. }, OpFailure::Failed(m))) if m == "boom")
        );
        let panicked = Op::once("panics", || panic!("kaboom {}", 7)).run();
        assert!(
            matches!(panicked, Err((Failed { label, host_function: false, .. }, OpFailure::Panicked(m))) if m == "kaboom 7" && label == "panics")
        );
    }
}
