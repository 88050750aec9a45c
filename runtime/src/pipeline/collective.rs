//! A stage's communication: the consecutive `send`, `recv`, `all_reduce`, `broadcast`,
//! `all_gather` and `reduce_scatter` statements of one stage, which `gpu_pipeline!`
//! enqueues as one group on the stage's stream ([`CommStage`]).
//!
//! The generated step records each statement with the buffer it names (borrowed for the
//! statement; the step holds every buffer borrowed until it is enqueued) and the element
//! range it gives, then [`CommStage::finish`] checks the group as a whole and hands it to
//! the backend: one NCCL group on CUDA (`nccl/stage.rs`), one stream operation over the
//! ranges on the CPU backend (`cpu/collective/stage.rs`, over `cpu/parts.rs`), whose sends
//! and receives are posted together like NCCL's and whose collectives follow in statement
//! order. Each statement is an [`Op`] (`collective/op.rs`), the one description of the
//! operations both backends share.
//!
//! What is checked before anything is enqueued, the same on both backends: the buffers are
//! memory of the stage stream's device; ranges lie inside their buffers; and, by
//! [`Op::check`], peers and roots are ranks; the two sides of a collective have the lengths it needs (`all_gather`'s output is
//! `size` times its input, ...); `avg` reduces floats; no range the group writes overlaps
//! another range of the group (its operations run at once).
//!
//! Every group has the communicator's deadline ([`Communicator::timeout`]): on the CPU
//! backend the stream operation gives up when it passes, on NCCL the watchdog
//! (`nccl/watchdog.rs`) does. Either way the communicator is aborted and the failure,
//! naming the pipeline and stage given by [`CommStage::in_stage`], surfaces at the next wait
//! as [`Error::Communication`] (or inside the pipeline's [`Error::Step`]); a group on an
//! aborted communicator is refused at [`CommStage::finish`].

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytemuck::Pod;

use crate::collective::op::{self, Op};
use crate::collective::{Element, ElementKind, Names, ReduceOp, StageFailure, enqueue_cpu_stage};
use crate::communicator::{CommBackend, Communicator};
use crate::cpu;
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::memory::alloc::DeviceMemory;
use crate::memory::view::sealed::DeviceMemory as _;
use crate::nccl::StagePart;
use crate::stream::{Stream, StreamBackend};

/// A rank as a statement names it (`send x to (rank + 1) % size`): any integer type.
///
/// ```
/// use gpu_pipeline::Rank;
/// assert_eq!(3u8.index(), Some(3));
/// assert_eq!((-1i32).index(), None); // no such rank: the statement is refused when it runs
/// ```
///
/// In a pipeline, `send x to (rank + 1) % size;` takes `rank` and `size` of any integer
/// type; a float is a compile error:
///
/// ```compile_fail
/// fn peer<R: gpu_pipeline::Rank>(rank: R) -> Option<usize> {
///     rank.index()
/// }
/// peer(1.0f32);
/// ```
#[diagnostic::on_unimplemented(
    message = "a peer or root rank must be an integer, not `{Self}`",
    label = "not a rank",
    note = "write the rank as an integer expression, e.g. `(comm.rank() + 1) % comm.size()`"
)]
pub trait Rank: Copy {
    /// The rank, or `None` when negative or too large.
    fn index(self) -> Option<usize>;
}

macro_rules! ranks {
    ($($ty:ty),*) => {$(
        impl Rank for $ty {
            fn index(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
        }
    )*};
}

ranks!(usize, u8, u16, u32, u64, i8, i16, i32, i64, isize);

/// Elements `start..end` of one device allocation.
#[derive(Clone, Debug)]
struct Part {
    memory: DeviceMemory,
    /// Bytes from the allocation's start.
    offset: usize,
    /// Elements.
    len: usize,
    /// Bytes per element.
    elem: usize,
}

impl Part {
    fn bytes(&self) -> usize {
        self.len * self.elem
    }

    /// Whether two parts share bytes of one allocation.
    fn overlaps(&self, other: &Part) -> bool {
        let same = match (&self.memory, &other.memory) {
            (DeviceMemory::Cuda(a), DeviceMemory::Cuda(b)) => Arc::ptr_eq(a, b),
            (DeviceMemory::Cpu(a), DeviceMemory::Cpu(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same && self.offset < other.offset + other.bytes()
            && other.offset < self.offset + self.bytes()
    }
}

/// One statement, checked.
type Planned = Op<Part>;

/// Sends, receives and collectives recorded in order and enqueued as one group on a stream
/// by [`finish`](CommStage::finish), on either backend: what each run of communication
/// statements of a `gpu_pipeline!` stage becomes, and usable by hand.
///
/// The buffers are borrowed for each call only (the group keeps their allocations), so one
/// buffer can give a row to send and another row to receive; [`finish`](CommStage::finish)
/// refuses a group in which a written range overlaps any other range.
///
/// ```
/// use gpu_pipeline::collective::ReduceOp;
/// use gpu_pipeline::{CommStage, Communicator, Context, DeviceBuffer, Stream};
/// # fn main() -> gpu_pipeline::Result<()> {
/// let comm = Communicator::cpu_ranks(1)?.remove(0);
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut field = DeviceBuffer::from_slice(&stream, &[0.0f32, 0.0, 1.0, 2.0])?;
/// let mut norm = DeviceBuffer::from_slice(&stream, &[3.0f32])?;
/// let mut group = CommStage::new(&comm, &stream);
/// group.send(&field, 2..4, 0)?; // to itself: the only rank
/// group.recv(&mut field, 0..2, 0)?;
/// group.all_reduce_in_place(&mut norm, .., ReduceOp::Sum)?;
/// group.finish()?;
/// assert_eq!(field.to_vec(&stream)?, [1.0, 2.0, 1.0, 2.0]);
/// assert_eq!(norm.to_vec(&stream)?, [3.0]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CommStage<'s> {
    comm: &'s Communicator,
    stream: &'s Stream,
    ops: Vec<(ElementKind, Planned)>,
    /// The pipeline and stage, for errors.
    names: Names,
}

/// `lo..hi` of the range bounds, checked against a buffer of `len` elements.
fn elements(
    call: &'static str,
    len: usize,
    range: impl RangeBounds<usize>,
) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(start), Some(end)) if start <= end && end <= len => Ok((start, end)),
        _ => Err(Error::invalid(
            call,
            format!(
                "the range {:?}..{:?} is not inside the buffer's {len} elements",
                range.start_bound(),
                range.end_bound()
            ),
        )),
    }
}

impl<'s> CommStage<'s> {
    /// An empty group of `comm`'s operations on `stream` (the stage's stream).
    pub fn new(comm: &'s Communicator, stream: &'s Stream) -> CommStage<'s> {
        CommStage {
            comm,
            stream,
            ops: Vec::new(),
            names: Names::default(),
        }
    }

    /// Names the pipeline and stage this group belongs to, for a failure's report (what
    /// `gpu_pipeline!` steps do).
    pub fn in_stage(mut self, pipeline: &'static str, stage: &'static str) -> CommStage<'s> {
        self.names = Names {
            pipeline: Some(pipeline),
            stage: Some(stage),
        };
        self
    }

    /// The elements `range` of `buffer`, checked to be memory of the stream's device.
    fn part<T: Pod>(
        &self,
        call: &'static str,
        buffer: &DeviceBuffer<T>,
        range: impl RangeBounds<usize>,
    ) -> Result<Part> {
        let region = buffer.device_region();
        if !region.alloc.ctx.shares_memory_with(self.stream.context()) {
            return Err(Error::mismatch(
                call,
                "the buffer is memory of another device (context) than the stage's stream",
            ));
        }
        let elem = std::mem::size_of::<T>();
        let (start, end) = elements(call, region.len, range)?;
        Ok(Part {
            memory: region.alloc.memory.clone(),
            offset: region.offset + start * elem,
            len: end - start,
            elem,
        })
    }

    /// The rank a statement names, as an index (its range is checked with the operation).
    fn rank(&self, call: &'static str, what: &str, rank: impl Rank) -> Result<usize> {
        rank.index().ok_or_else(|| {
            Error::invalid(
                call,
                format!(
                    "the {what} is not one of the communicator's {} ranks",
                    self.comm.size()
                ),
            )
        })
    }

    /// Checks one statement by the rules both backends share and records it.
    fn push<T: Element>(&mut self, call: &'static str, op: Planned) -> Result<()> {
        op.check(T::KIND, self.comm.size(), None, op::STATEMENT, |p| p.len)
            .map_err(|m| Error::invalid(call, m))?;
        self.ops.push((T::KIND, op));
        Ok(())
    }

    /// `send BUFFER[RANGE] to PEER;`.
    pub fn send<T: Element>(
        &mut self,
        buffer: &DeviceBuffer<T>,
        range: impl RangeBounds<usize>,
        peer: impl Rank,
    ) -> Result<()> {
        const CALL: &str = "send";
        let data = self.part(CALL, buffer, range)?;
        let peer = self.rank(CALL, "peer", peer)?;
        self.push::<T>(CALL, Op::Send { data, peer })
    }

    /// `recv BUFFER[RANGE] from PEER;`.
    pub fn recv<T: Element>(
        &mut self,
        buffer: &mut DeviceBuffer<T>,
        range: impl RangeBounds<usize>,
        peer: impl Rank,
    ) -> Result<()> {
        const CALL: &str = "recv";
        let data = self.part(CALL, buffer, range)?;
        let peer = self.rank(CALL, "peer", peer)?;
        self.push::<T>(CALL, Op::Recv { data, peer })
    }

    /// `all_reduce(OP) SRC[RANGE] -> DST[RANGE];`.
    pub fn all_reduce<T: Element>(
        &mut self,
        send: &DeviceBuffer<T>,
        send_range: impl RangeBounds<usize>,
        recv: &mut DeviceBuffer<T>,
        recv_range: impl RangeBounds<usize>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "all_reduce";
        let send = Some(self.part(CALL, send, send_range)?);
        let recv = self.part(CALL, recv, recv_range)?;
        self.push::<T>(CALL, Op::AllReduce { send, recv, op })
    }

    /// `all_reduce(OP) BUFFER[RANGE];`: in place.
    pub fn all_reduce_in_place<T: Element>(
        &mut self,
        data: &mut DeviceBuffer<T>,
        range: impl RangeBounds<usize>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "all_reduce";
        let recv = self.part(CALL, data, range)?;
        self.push::<T>(
            CALL,
            Op::AllReduce {
                send: None,
                recv,
                op,
            },
        )
    }

    /// `broadcast SRC[RANGE] -> DST[RANGE] from ROOT;` (`SRC` is read on the root only).
    pub fn broadcast<T: Element>(
        &mut self,
        send: &DeviceBuffer<T>,
        send_range: impl RangeBounds<usize>,
        recv: &mut DeviceBuffer<T>,
        recv_range: impl RangeBounds<usize>,
        root: impl Rank,
    ) -> Result<()> {
        const CALL: &str = "broadcast";
        let root = self.rank(CALL, "root", root)?;
        let send = Some(self.part(CALL, send, send_range)?);
        let recv = self.part(CALL, recv, recv_range)?;
        self.push::<T>(CALL, Op::Broadcast { send, recv, root })
    }

    /// `broadcast BUFFER[RANGE] from ROOT;`: in place.
    pub fn broadcast_in_place<T: Element>(
        &mut self,
        data: &mut DeviceBuffer<T>,
        range: impl RangeBounds<usize>,
        root: impl Rank,
    ) -> Result<()> {
        const CALL: &str = "broadcast";
        let root = self.rank(CALL, "root", root)?;
        let recv = self.part(CALL, data, range)?;
        self.push::<T>(
            CALL,
            Op::Broadcast {
                send: None,
                recv,
                root,
            },
        )
    }

    /// `all_gather SRC[RANGE] -> DST[RANGE];`: `DST` holds `size` times `SRC`, rank order.
    pub fn all_gather<T: Element>(
        &mut self,
        send: &DeviceBuffer<T>,
        send_range: impl RangeBounds<usize>,
        recv: &mut DeviceBuffer<T>,
        recv_range: impl RangeBounds<usize>,
    ) -> Result<()> {
        const CALL: &str = "all_gather";
        let send = self.part(CALL, send, send_range)?;
        let recv = self.part(CALL, recv, recv_range)?;
        self.push::<T>(CALL, Op::AllGather { send, recv })
    }

    /// `reduce_scatter(OP) SRC[RANGE] -> DST[RANGE];`: `SRC` holds `size` times `DST`.
    pub fn reduce_scatter<T: Element>(
        &mut self,
        send: &DeviceBuffer<T>,
        send_range: impl RangeBounds<usize>,
        recv: &mut DeviceBuffer<T>,
        recv_range: impl RangeBounds<usize>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "reduce_scatter";
        let send = self.part(CALL, send, send_range)?;
        let recv = self.part(CALL, recv, recv_range)?;
        self.push::<T>(CALL, Op::ReduceScatter { send, recv, op })
    }

    /// Checks the group as a whole and enqueues it on the stage's stream.
    pub fn finish(self) -> Result<()> {
        const CALL: &str = "communication";
        if self.ops.is_empty() {
            return Ok(());
        }
        let abort = self.comm.abort_state();
        if let Some(refusal) = abort.refusal(
            self.comm.rank(),
            self.names.pipeline,
            self.names.stage,
            describe_ops(&self.ops),
        ) {
            return Err(refusal.into());
        }
        let parts: Vec<(&Part, bool)> = self.ops.iter().flat_map(|(_, op)| op.ranges()).collect();
        for (i, (a, writes)) in parts.iter().enumerate() {
            for (j, (b, other_writes)) in parts.iter().enumerate() {
                if i != j && (*writes || *other_writes) && a.overlaps(b) {
                    return Err(Error::invalid(
                        CALL,
                        format!(
                            "one statement writes elements that another statement of the stage's group also uses (bytes {}..{} and {}..{} of one buffer); the group's operations run at once, so they would race: use disjoint ranges, or put them in separate stages",
                            a.offset,
                            a.offset + a.bytes(),
                            b.offset,
                            b.offset + b.bytes()
                        ),
                    ));
                }
            }
        }
        match (self.comm.kind(), self.stream.kind()) {
            (CommBackend::Nccl(comm), StreamBackend::Cuda(_)) => {
                let ops = self
                    .ops
                    .iter()
                    .map(|(kind, op)| Ok((*kind, op.try_map(|part, _| nccl_part(part))?)))
                    .collect::<Result<Vec<_>>>()?;
                let label = describe_ops(&self.ops);
                comm.enqueue_stage(CALL, self.stream, &ops, self.names, label)
            }
            (CommBackend::Cpu(comm), StreamBackend::Cpu(stream)) => {
                let ops = self
                    .ops
                    .iter()
                    .map(|(kind, op)| Ok((*kind, op.try_map(|part, _| cpu_range(part))?)))
                    .collect::<Result<Vec<_>>>()?;
                let failure = StageFailure {
                    abort: abort.clone(),
                    order: self.comm.issue_order().clone(),
                    rank: self.comm.rank(),
                    names: self.names,
                };
                Ok(enqueue_cpu_stage(comm, stream, &ops, failure)?)
            }
            (comm, _) => Err(Error::BackendMismatch {
                call: CALL,
                backend: self.stream.context().backend().name(),
                reason: format!(
                    "the communicator is {}, the stage's stream is not",
                    match comm {
                        CommBackend::Nccl(_) => "NCCL (CUDA)",
                        CommBackend::Cpu(_) => "a CPU-backend rank",
                    }
                ),
            }),
        }
    }
}

/// The statements of a group in words, e.g. `send (4 f32) to rank 1; all_reduce(sum) (1 f32)`.
fn describe_ops(ops: &[(ElementKind, Planned)]) -> String {
    let text: Vec<String> = ops
        .iter()
        .map(|(kind, op)| op.describe(*kind, |p| p.len))
        .collect();
    text.join("; ")
}

/// The NCCL range of a part.
fn nccl_part(part: &Part) -> Result<StagePart> {
    match &part.memory {
        DeviceMemory::Cuda(memory) => Ok(StagePart {
            memory: memory.clone(),
            offset: part.offset,
            len: part.len,
        }),
        DeviceMemory::Cpu(_) => Err(Error::mismatch(
            "communication",
            "a CPU-backend buffer in an NCCL operation",
        )),
    }
}

/// The CPU-backend range of a part.
fn cpu_range(part: &Part) -> Result<cpu::Range> {
    match &part.memory {
        DeviceMemory::Cpu(memory) => Ok(cpu::Range {
            memory: memory.clone(),
            offset: part.offset,
            bytes: part.bytes(),
        }),
        DeviceMemory::Cuda(_) => Err(Error::mismatch(
            "communication",
            "a CUDA buffer in a CPU-backend operation",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CaptureMode, Context};

    /// Two ranks on the checked CPU backend: a halo exchange between two rows of one buffer
    /// and an all-reduce in one group, eagerly and replayed from a captured graph.
    #[test]
    fn a_stage_group_exchanges_rows_and_reduces_on_cpu_ranks() {
        let ranks = Communicator::cpu_ranks(2).unwrap();
        std::thread::scope(|scope| {
            for comm in ranks {
                scope.spawn(move || {
                    let ctx = Context::cpu_checked();
                    let stream = Stream::new(&ctx).unwrap();
                    let (rank, other) = (comm.rank(), 1 - comm.rank());
                    let me = rank as f32 + 1.0;
                    // Row 0 is received, row 1 is sent.
                    let mut field = DeviceBuffer::from_slice(&stream, &[0.0, 0.0, me, me]).unwrap();
                    let norm = DeviceBuffer::from_slice(&stream, &[me]).unwrap();
                    let mut sum = DeviceBuffer::<f32>::alloc(&ctx, 1).unwrap();
                    let step = |field: &mut DeviceBuffer<f32>, sum: &mut DeviceBuffer<f32>| {
                        let mut group = CommStage::new(&comm, &stream);
                        group.send(&*field, 2..4, other)?;
                        group.recv(field, 0..2, other)?;
                        group.all_reduce(&norm, .., sum, .., ReduceOp::Sum)?;
                        group.finish()
                    };
                    step(&mut field, &mut sum).unwrap();
                    stream.synchronize().unwrap();
                    let theirs = other as f32 + 1.0;
                    assert_eq!(field.to_vec(&stream).unwrap(), [theirs, theirs, me, me]);
                    assert_eq!(sum.to_vec(&stream).unwrap(), [3.0]);

                    stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
                    let recorded = step(&mut field, &mut sum);
                    let graph = stream.end_capture().unwrap();
                    recorded.unwrap();
                    let exec = graph.instantiate().unwrap();
                    for _ in 0..3 {
                        exec.launch(&stream).unwrap();
                    }
                    stream.synchronize().unwrap();
                    assert_eq!(field.to_vec(&stream).unwrap(), [theirs, theirs, me, me]);
                    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
                });
            }
        });
    }

    #[test]
    fn overlapping_ranges_and_bad_ranks_are_refused_before_enqueue() {
        let comm = Communicator::cpu_ranks(1).unwrap().remove(0);
        let ctx = Context::cpu();
        let stream = Stream::new(&ctx).unwrap();
        let mut field = DeviceBuffer::<f32>::alloc(&ctx, 4).unwrap();
        let mut group = CommStage::new(&comm, &stream);
        group.send(&field, 0..2, 0).unwrap();
        group.recv(&mut field, 1..3, 0).unwrap();
        let err = group.finish().unwrap_err().to_string();
        assert!(err.contains("would race"), "{err}");

        let mut group = CommStage::new(&comm, &stream);
        let err = group.send(&field, 0..2, 1).unwrap_err().to_string();
        assert!(
            err.contains("not one of the communicator's 1 ranks"),
            "{err}"
        );
        let err = group.send(&field, 3..9, 0).unwrap_err().to_string();
        assert!(err.contains("not inside the buffer's 4 elements"), "{err}");
        let ints = DeviceBuffer::<i32>::alloc(&ctx, 4).unwrap();
        let mut out = DeviceBuffer::<i32>::alloc(&ctx, 4).unwrap();
        let err = group
            .all_reduce(&ints, .., &mut out, .., ReduceOp::Avg)
            .unwrap_err()
            .to_string();
        assert!(err.contains("floating-point"), "{err}");
    }
}
