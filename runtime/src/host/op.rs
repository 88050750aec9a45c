//! Operations: what a stream runs, which buffers it touches, and whether it can be replayed.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How an operation touches a buffer. A read-modify-write is a [`Access::Write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Access {
    /// The operation only reads the buffer.
    Read,
    /// The operation writes (and possibly also reads) the buffer.
    Write,
}

impl Access {
    /// Whether this access writes.
    pub(crate) fn is_write(self) -> bool {
        self == Access::Write
    }
}

/// A buffer as the host backend knows it: a small id, unique in the process, whose name the
/// context keeps for race reports (see `HostContext::register_buffer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BufferId(u64);

impl BufferId {
    /// A process-unique id, so buffers of different contexts never collide in a graph.
    pub(super) fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        BufferId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The raw id, for logs and DOT output.
    pub(crate) fn get(self) -> u64 {
        self.0
    }
}

/// A buffer argument of a kernel: where its bytes live and how the kernel uses them.
///
/// The host backend never dereferences `address`; the kernel's host implementation (built by
/// the launch layer) does, over `byte_len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BufferArg {
    /// Address of the first element.
    pub(crate) address: usize,
    /// Length in bytes.
    pub(crate) byte_len: usize,
    /// Size of one element in bytes.
    pub(crate) elem_size: usize,
    /// Whether the kernel may write through this argument.
    pub(crate) writable: bool,
    /// The buffer, for the race detector.
    pub(crate) buffer: BufferId,
}

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

    /// The access a buffer argument implies; scalars touch no buffer.
    fn access(&self) -> Option<(BufferId, Access)> {
        let arg = self.as_buffer()?;
        let access = if arg.writable {
            Access::Write
        } else {
            Access::Read
        };
        Some((arg.buffer, access))
    }
}

/// Replayable host work: runs once per execution, including every graph replay.
pub(crate) type HostWork = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;
/// A kernel's host implementation, called with the current arguments.
pub(crate) type KernelFn = Arc<dyn Fn(&[KernelArgValue]) -> Result<(), String> + Send + Sync>;
/// One-shot host work (a host function); it cannot be captured.
pub(crate) type OnceWork = Box<dyn FnOnce() -> Result<(), String> + Send>;
/// Something an operation keeps alive (and a graph node captured from it, for the graph's
/// whole life): the buffers it touches, its kernel's module, tags the layers above read back.
pub(crate) type Retained = Arc<dyn Any + Send + Sync>;

/// What an operation does when it runs.
pub(super) enum OpWork {
    Replayable(HostWork),
    Kernel {
        func: KernelFn,
        args: Vec<KernelArgValue>,
    },
    Once(OnceWork),
}

/// One unit of stream work: a label for reports, the buffers it declares, and the work.
///
/// ```ignore
/// let op = HostOp::replayable("copy next -> snapshot", move || copy(&next, &snapshot))
///     .reads(next_id)
///     .writes(snapshot_id);
/// stream.enqueue(op)?;
/// ```
pub(crate) struct HostOp {
    pub(super) label: Cow<'static, str>,
    pub(super) accesses: Vec<(BufferId, Access)>,
    pub(super) work: OpWork,
    pub(super) retained: Vec<Retained>,
    /// Kept only if the op is captured (then by its graph node); dropped at enqueue
    /// otherwise, outside the stream's lock.
    pub(super) graph_only: Vec<Retained>,
}

impl HostOp {
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
    ) -> Self {
        Self::with_work(label, OpWork::Kernel { func, args })
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
        HostOp {
            label: label.into(),
            accesses: Vec::new(),
            work,
            retained: Vec::new(),
            graph_only: Vec::new(),
        }
    }

    /// Declares that the operation reads `buffer`.
    pub(crate) fn reads(self, buffer: BufferId) -> Self {
        self.access(buffer, Access::Read)
    }

    /// Declares that the operation writes `buffer`.
    pub(crate) fn writes(self, buffer: BufferId) -> Self {
        self.access(buffer, Access::Write)
    }

    /// Declares an access to `buffer`.
    pub(crate) fn access(mut self, buffer: BufferId, access: Access) -> Self {
        self.accesses.push((buffer, access));
        self
    }

    /// Keeps `object` alive as long as the operation (until it has run), or as long as the
    /// graph node it is captured into; [`GraphNode::retained`](super::GraphNode::retained)
    /// hands it back.
    pub(crate) fn retain(mut self, object: Retained) -> Self {
        self.retained.push(object);
        self
    }

    /// Keeps `object` alive only if the op is captured, for as long as its graph node (e.g. a
    /// buffer handle, whose last drop should wait for eager work rather than be deferred to
    /// it); [`GraphNode::retained`](super::GraphNode::retained) hands it back after those
    /// kept by [`HostOp::retain`].
    pub(crate) fn retain_in_graph(mut self, object: Retained) -> Self {
        self.graph_only.push(object);
        self
    }

    /// The label used in reports.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Whether this is a one-shot host function (not capturable).
    pub(crate) fn is_one_shot(&self) -> bool {
        matches!(self.work, OpWork::Once(_))
    }

    /// Declared accesses plus those implied by kernel buffer arguments, one per buffer.
    pub(crate) fn effective_accesses(&self) -> Vec<(BufferId, Access)> {
        let args = match &self.work {
            OpWork::Kernel { args, .. } => args.as_slice(),
            OpWork::Replayable(_) | OpWork::Once(_) => &[],
        };
        effective_accesses(&self.accesses, args)
    }

    /// Runs the work, catching panics; on failure hands back the label for the report.
    pub(super) fn run(self) -> Result<(), (Cow<'static, str>, OpFailure)> {
        let HostOp {
            label,
            work,
            retained,
            ..
        } = self;
        // The work is moved into the guard so that its drop (user captures) is guarded too.
        let result = run_guarded(move || match work {
            OpWork::Replayable(f) => f(),
            OpWork::Kernel { func, args } => func(&args),
            OpWork::Once(f) => f(),
        });
        // Released only once the work is done with what they keep alive.
        drop(retained);
        result.map_err(|failure| (label, failure))
    }
}

impl fmt::Debug for HostOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.work {
            OpWork::Replayable(_) => "replayable",
            OpWork::Kernel { .. } => "kernel",
            OpWork::Once(_) => "once",
        };
        f.debug_struct("HostOp")
            .field("label", &self.label)
            .field("kind", &kind)
            .field("accesses", &self.accesses)
            .finish()
    }
}

/// Declared accesses merged with kernel-argument accesses: sorted, one entry per buffer, a
/// write winning over a read (so one operation never races with itself).
pub(super) fn effective_accesses(
    declared: &[(BufferId, Access)],
    args: &[KernelArgValue],
) -> Vec<(BufferId, Access)> {
    let mut all: Vec<(BufferId, Access)> = declared
        .iter()
        .copied()
        .chain(args.iter().filter_map(KernelArgValue::access))
        .collect();
    // Sorting by (id, access) puts a buffer's Write after its Read; keep the last of each run.
    all.sort_unstable();
    let mut merged: Vec<(BufferId, Access)> = Vec::with_capacity(all.len());
    for (buffer, access) in all {
        match merged.last_mut() {
            Some(last) if last.0 == buffer => last.1 = access,
            _ => merged.push((buffer, access)),
        }
    }
    merged
}

/// Why an operation did not complete.
#[derive(Debug)]
pub(super) enum OpFailure {
    /// The work returned an error message.
    Failed(String),
    /// The work panicked; the panic message.
    Panicked(String),
}

/// Runs user work so that neither an error nor a panic escapes into the worker thread.
pub(super) fn run_guarded(work: impl FnOnce() -> Result<(), String>) -> Result<(), OpFailure> {
    match panic::catch_unwind(AssertUnwindSafe(work)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(OpFailure::Failed(message)),
        Err(payload) => Err(OpFailure::Panicked(panic_message(payload.as_ref()))),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_accesses_merge_with_write_winning() {
        let (a, b) = (BufferId::fresh(), BufferId::fresh());
        let arg = KernelArgValue::Buffer(BufferArg {
            address: 0,
            byte_len: 16,
            elem_size: 4,
            writable: true,
            buffer: a,
        });
        let merged = effective_accesses(&[(a, Access::Read), (b, Access::Read)], &[arg]);
        assert_eq!(merged, vec![(a, Access::Write), (b, Access::Read)]);
    }

    #[test]
    fn scalars_round_trip_and_check_size() {
        let arg = KernelArgValue::scalar(2.5f32);
        assert_eq!(arg.as_scalar::<f32>(), Some(2.5));
        assert_eq!(arg.as_scalar::<f64>(), None);
    }

    #[test]
    fn run_catches_errors_and_panics() {
        let failed = HostOp::replayable("fails", || Err("boom".into())).run();
        assert!(matches!(failed, Err((_, OpFailure::Failed(m))) if m == "boom"));
        let panicked = HostOp::once("panics", || panic!("kaboom {}", 7)).run();
        assert!(
            matches!(panicked, Err((label, OpFailure::Panicked(m))) if m == "kaboom 7" && label == "panics")
        );
    }
}
