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

use super::adapt;
use super::comm::{Communicator, data_type, red_op, refuse_in_group};
use super::watchdog::{self, Captured, What};
use crate::collective::{ElementKind, Names, ReduceOp};
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

/// One operation of a stage's group, with the element kind of its buffers.
#[derive(Clone, Debug)]
pub(crate) enum StageOp {
    /// `ncclSend` of `data` to `peer`.
    Send {
        /// Read.
        data: Part,
        /// The receiving rank.
        peer: usize,
    },
    /// `ncclRecv` into `data` from `peer`.
    Recv {
        /// Written.
        data: Part,
        /// The sending rank.
        peer: usize,
    },
    /// `ncclAllReduce` (`send` and `recv` may be the same range: in place).
    AllReduce {
        /// Read.
        send: Part,
        /// Written.
        recv: Part,
        /// The operator.
        op: ReduceOp,
    },
    /// `ncclBroadcast` from `root`'s `send` (in place when the same range as `recv`).
    Broadcast {
        /// Read on the root.
        send: Part,
        /// Written.
        recv: Part,
        /// The sending rank.
        root: usize,
    },
    /// `ncclAllGather`: `recv` holds `size` times `send`.
    AllGather {
        /// Read.
        send: Part,
        /// Written.
        recv: Part,
    },
    /// `ncclReduceScatter`: `send` holds `size` times `recv`.
    ReduceScatter {
        /// Read.
        send: Part,
        /// Written.
        recv: Part,
        /// The operator.
        op: ReduceOp,
    },
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
        ops: &[(ElementKind, StageOp)],
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
        let rank = |what: &str, r: usize| -> Result<()> {
            if r < self.size() {
                Ok(())
            } else {
                Err(Error::invalid(
                    stage,
                    format!(
                        "{what} {r} is not one of the communicator's {} ranks",
                        self.size()
                    ),
                ))
            }
        };
        // Checked calls, and every range each touches (whether it writes it).
        let mut calls = Vec::with_capacity(ops.len());
        let mut touched: Vec<(&Arc<cuda::DeviceMemory>, Checked, bool)> = Vec::new();
        for (kind, op) in ops {
            let (kind, size) = (*kind, kind.size());
            let check = |what: &str, part: &Part| check(what, part, size);
            let call = match op {
                StageOp::Send { data, peer } => {
                    rank("peer", *peer)?;
                    let d = check("send", data)?;
                    touched.push((&data.memory, d, false));
                    Raw::Send(d.ptr, data.len, *peer)
                }
                StageOp::Recv { data, peer } => {
                    rank("peer", *peer)?;
                    let d = check("receive", data)?;
                    touched.push((&data.memory, d, true));
                    Raw::Recv(d.ptr, data.len, *peer)
                }
                StageOp::AllReduce { send, recv, op } => {
                    let (s, r) = (check("send", send)?, check("receive", recv)?);
                    same_len(stage, send.len, recv.len)?;
                    touched.push((&recv.memory, r, true));
                    if s.ptr != r.ptr {
                        touched.push((&send.memory, s, false));
                    }
                    Raw::AllReduce(s.ptr, r.ptr, recv.len, red_op(stage, *op, kind)?)
                }
                StageOp::Broadcast { send, recv, root } => {
                    rank("root", *root)?;
                    let (s, r) = (check("send", send)?, check("receive", recv)?);
                    same_len(stage, send.len, recv.len)?;
                    touched.push((&recv.memory, r, true));
                    if s.ptr != r.ptr {
                        touched.push((&send.memory, s, false));
                    }
                    Raw::Broadcast(s.ptr, r.ptr, recv.len, *root)
                }
                StageOp::AllGather { send, recv } => {
                    let (s, r) = (check("send", send)?, check("receive", recv)?);
                    times_size(stage, "receive", recv.len, send.len, self.size())?;
                    touched.push((&recv.memory, r, true));
                    touched.push((&send.memory, s, false));
                    Raw::AllGather(s.ptr, r.ptr, send.len)
                }
                StageOp::ReduceScatter { send, recv, op } => {
                    let (s, r) = (check("send", send)?, check("receive", recv)?);
                    times_size(stage, "send", send.len, recv.len, self.size())?;
                    touched.push((&recv.memory, r, true));
                    touched.push((&send.memory, s, false));
                    Raw::ReduceScatter(s.ptr, r.ptr, recv.len, red_op(stage, *op, kind)?)
                }
            };
            calls.push((call, data_type(kind)));
        }
        disjoint_writes(stage, &touched)?;

        let mut peers = ops.iter().filter_map(|(_, op)| match op {
            StageOp::Send { peer, .. } | StageOp::Recv { peer, .. } => Some(*peer),
            _ => None,
        });
        let first = peers.next();
        let what = What {
            names,
            operation: label,
            peer: first.filter(|&p| peers.all(|q| q == p)),
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
            unsafe { self.issue_group(&calls, raw) }
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
    /// Every call satisfies the raw level's contract (`comm.rs`), as `enqueue_stage` checks,
    /// and the stream's gate is held (uses noted) until this returns.
    unsafe fn issue_group(
        &self,
        calls: &[(Raw, super::sys::ncclDataType_t)],
        raw: super::sys::cudaStream_t,
    ) -> Result<()> {
        self.raw_group_start()?;
        let mut issued = Ok(());
        for (call, ty) in calls {
            // SAFETY: every address lies in a live CUDA allocation of the communicator's
            // context with room for the counts passed (checked by `enqueue_stage`, counts
            // against each other and the communicator's size); the caller holds the
            // allocations and the generated step holds the buffers borrowed, and the uses are
            // noted (and kept by a capture) under the gate held across the group's end, so
            // they outlive the work; written ranges overlap no other range of the group;
            // `raw` is a live stream of the context. The peers' matching calls are the
            // pipeline's: every rank runs the same expansion; a mismatch hangs NCCL's kernels
            // until the watchdog aborts the communicator, which ends them.
            let result = unsafe { self.issue_raw(call, *ty, raw) };
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

    /// Makes one checked raw call.
    ///
    /// # Safety
    /// The raw level's contract (`comm.rs`) for the addresses and counts of `call`.
    unsafe fn issue_raw(
        &self,
        call: &Raw,
        ty: super::sys::ncclDataType_t,
        stream: super::sys::cudaStream_t,
    ) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match *call {
                Raw::Send(ptr, len, peer) => self.raw_send(ptr, len, ty, peer, stream),
                Raw::Recv(ptr, len, peer) => self.raw_recv(ptr, len, ty, peer, stream),
                Raw::AllReduce(s, r, len, op) => self.raw_all_reduce(s, r, len, ty, op, stream),
                Raw::Broadcast(s, r, len, root) => self.raw_broadcast(s, r, len, ty, root, stream),
                Raw::AllGather(s, r, len) => self.raw_all_gather(s, r, len, ty, stream),
                Raw::ReduceScatter(s, r, len, op) => {
                    self.raw_reduce_scatter(s, r, len, ty, op, stream)
                }
            }
        }
    }
}

/// One operation, checked, as the raw level takes it.
enum Raw {
    Send(u64, usize, usize),
    Recv(u64, usize, usize),
    AllReduce(u64, u64, usize, super::sys::ncclRedOp_t),
    Broadcast(u64, u64, usize, usize),
    AllGather(u64, u64, usize),
    ReduceScatter(u64, u64, usize, super::sys::ncclRedOp_t),
}

fn same_len(stage: &'static str, send: usize, recv: usize) -> Result<()> {
    if send == recv {
        Ok(())
    } else {
        Err(Error::invalid(
            stage,
            format!(
                "the send range has {send} elements and the receive range {recv}; they must be equal"
            ),
        ))
    }
}

fn times_size(
    stage: &'static str,
    what: &str,
    big: usize,
    small: usize,
    size: usize,
) -> Result<()> {
    if Some(big) == small.checked_mul(size) {
        Ok(())
    } else {
        Err(Error::invalid(
            stage,
            format!(
                "the {what} range must hold {size} ranks times {small} elements, but has {big}"
            ),
        ))
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
