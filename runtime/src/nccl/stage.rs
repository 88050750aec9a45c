//! The communication of one pipeline stage: a run of sends, receives and collectives that
//! `gpu_pipeline!` enqueues as one NCCL group on the stage's stream, over ranges of device
//! buffers the generated code holds borrowed for the whole step.
//!
//! Each range arrives as an allocation and a byte offset (the generated code may name
//! several ranges of one buffer, one read and one written, which no pair of borrows could
//! express); everything the raw level requires is checked here before NCCL sees it:
//! - every range lies inside its allocation, which is CUDA memory of the communicator's
//!   context, and the stream is a CUDA stream of that context;
//! - counts agree with the operation (`all_gather`'s output is `size` times its input, ...),
//!   peers and roots are ranks, `avg` reduces floats;
//! - no range an operation writes overlaps any other range of the group (NCCL runs a
//!   group's operations concurrently; a receive into the row another operation sends would
//!   be a race on the device).
//!
//! The group is then enqueued under the stream's gate (capture check, use notes, capture
//! keep-alive and `ncclGroupStart` ... `ncclGroupEnd` as one), so it is wholly inside or
//! wholly outside a capture. The ranges' allocations are held by the caller's `Arc`s for the
//! call; afterwards the allocations' free rule (uses noted on the stream) or the captured
//! graph keeps them alive.

use std::sync::Arc;

use super::adapt::{self, Span};
use super::comm::{Communicator, refuse_in_group};
use super::watchdog::{self, Captured, What};
use crate::collective::op::{self, Op};
use crate::collective::{ElementKind, Names};
use crate::cuda;
use crate::error::{Error, Result};
use crate::stream::Stream;

/// `len` elements of `kind` starting `offset` bytes into a CUDA allocation.
#[derive(Clone, Debug)]
pub(crate) struct Part {
    /// The allocation.
    pub(crate) memory: Arc<cuda::DeviceMemory>,
    /// Bytes from its start.
    pub(crate) offset: usize,
    /// Elements covered.
    pub(crate) len: usize,
}

/// A checked device range: its address and its byte span in the allocation.
#[derive(Clone, Copy, Debug)]
struct Checked {
    ptr: u64,
    start: usize,
    end: usize,
}

impl Communicator {
    /// Enqueues `ops` (each with the element kind of its buffers) as one NCCL group on
    /// `stream`, after checking them (module docs). `stage` names the caller in errors;
    /// `names` and `label` (the group in words) name it in a failure's report.
    ///
    /// The group is watched against the communicator's deadline (`watchdog.rs`): eagerly
    /// from now; captured, from each launch of the graph.
    pub(crate) fn enqueue_stage(
        &self,
        stage: &'static str,
        stream: &Stream,
        ops: &[(ElementKind, Op<Part>)],
        names: Names,
        label: String,
    ) -> Result<()> {
        refuse_in_group(stage)?;
        let raw = adapt::raw_stream(stage, stream, self.context())?;
        let ctx = self.context().cuda_only(stage)?.raw();
        let check = |what: &str, part: &Part, size: usize| -> Result<Checked> {
            if part.memory.context().raw() != ctx {
                return Err(Error::invalid(
                    stage,
                    format!("the {what} buffer is not memory of the communicator's device"),
                ));
            }
            let end = part
                .len
                .checked_mul(size)
                .and_then(|bytes| part.offset.checked_add(bytes))
                .filter(|&end| end <= part.memory.bytes())
                .ok_or_else(|| {
                    Error::invalid(
                        stage,
                        format!(
                            "the {what} range ({} elements from byte {}) lies outside its buffer of {} bytes",
                            part.len,
                            part.offset,
                            part.memory.bytes()
                        ),
                    )
                })?;
            Ok(Checked {
                ptr: part.memory.ptr() + part.offset as u64,
                start: part.offset,
                end,
            })
        };
        // Checked calls, and every range each touches (whether it writes it).
        let mut calls = Vec::with_capacity(ops.len());
        let mut touched: Vec<(&Arc<cuda::DeviceMemory>, Checked, bool)> = Vec::new();
        for (kind, op) in ops {
            let size = kind.size();
            op.check(*kind, self.size(), None, op::RANGES, |part| part.len)
                .map_err(|m| Error::invalid(stage, m))?;
            let spans = op.try_map(|part, writes| {
                let what = if writes { "receive" } else { "send" };
                let c = check(what, part, size)?;
                // An in-place operation's one range is touched once.
                touched.push((&part.memory, c, writes));
                Ok::<_, Error>(Span {
                    ptr: c.ptr,
                    len: part.len,
                })
            })?;
            calls.push((spans, *kind));
        }
        disjoint_writes(stage, &touched)?;

        let what = What {
            names,
            operation: label,
            peer: op::one_peer(ops.iter().map(|(_, op)| op)),
        };
        let gate = adapt::Enqueue::begin(stage, stream)?;
        for (memory, _, _) in &touched {
            gate.note_memory(memory);
        }
        gate.keep(self.shared());
        let capturing = gate.is_capturing();
        if capturing {
            gate.keep(Arc::new(Captured {
                handle: self.shared(),
                what: what.clone(),
            }));
        }
        // Held from the group's start to its end: the watchdog cannot abort in between.
        let issued = self.holding(stage, || {
            // SAFETY: every call was checked above (ranges inside live allocations of the
            // communicator's context, counts, disjoint writes); the gate is held until the
            // group has ended, with the uses noted (and kept by a capture); `raw` is a live
            // stream of the context.
            unsafe { self.issue_group(stage, &calls, raw) }
        });
        drop(gate);
        if let Err(error) = issued {
            // NCCL refused the group at once (e.g. ncclInvalidUsage for a recv from this
            // rank with no send): the failure is this stage's, named so.
            return Err(match error.comm_failure() {
                Some(_) => self
                    .abort_state()
                    .name_first(what.names, &what.operation, what.peer)
                    .map_or(error, Error::from),
                None => error,
            });
        }
        if !capturing {
            watchdog::watch(&self.shared(), stream, what)?;
        }
        Ok(())
    }

    /// `ncclGroupStart`, the calls, `ncclGroupEnd` (even after a failed call: NCCL holds what
    /// it accepted).
    ///
    /// # Safety
    /// Every call satisfies the raw level's contract (`raw.rs`), as `enqueue_stage` checks,
    /// and the stream's gate is held (uses noted) until this returns.
    unsafe fn issue_group(
        &self,
        stage: &'static str,
        calls: &[(Op<Span>, ElementKind)],
        raw: super::sys::cudaStream_t,
    ) -> Result<()> {
        self.raw_group_start()?;
        let mut issued = Ok(());
        for (call, kind) in calls {
            // SAFETY: every address lies in a live CUDA allocation of the communicator's
            // context with room for the counts passed (checked by `enqueue_stage`, counts
            // against each other and the communicator's size); the caller holds the
            // allocations and the generated step holds the buffers borrowed, and the uses are
            // noted (and kept by a capture) under the gate held across the group's end, so
            // they outlive the work; written ranges overlap no other range of the group;
            // `raw` is a live stream of the context. The peers' matching calls are the
            // pipeline's: every rank runs the same expansion; a mismatch hangs NCCL's kernels
            // until the watchdog aborts the communicator, which ends them.
            let result = unsafe { self.raw_enqueue(stage, call, *kind, raw) };
            if let Err(e) = result {
                issued = Err(e);
                break;
            }
        }
        // The group is ended even after a failed call: NCCL holds what it accepted.
        // SAFETY: as above, for every operation accepted since the start.
        let ended = unsafe { self.raw_group_end() };
        issued.and(ended)
    }
}

/// No written range overlaps another range of the group.
fn disjoint_writes(
    stage: &'static str,
    touched: &[(&Arc<cuda::DeviceMemory>, Checked, bool)],
) -> Result<()> {
    for (i, (memory, a, writes)) in touched.iter().enumerate() {
        for (j, (other, b, other_writes)) in touched.iter().enumerate() {
            if i == j || !(*writes || *other_writes) || !Arc::ptr_eq(memory, other) {
                continue;
            }
            if a.start < b.end && b.start < a.end {
                return Err(Error::invalid(
                    stage,
                    format!(
                        "bytes {}..{} are written by one operation of the group while another uses bytes {}..{} of the same buffer; NCCL runs a group's operations at once, so they would race",
                        a.start, a.end, b.start, b.end
                    ),
                ));
            }
        }
    }
    Ok(())
}
