//! The communication of one pipeline stage on the CPU backend, the twin of NCCL's
//! (`nccl/stage.rs`): one stream operation over every range of the group, which posts the
//! group's sends and receives together (as NCCL does), then runs its collectives in
//! statement order. The ranges were checked by the shared rules (`collective/op.rs`) when
//! the statements were recorded; what is checked here is the CPU's own: no written range
//! overlaps another.

use std::sync::{Arc, Mutex, PoisonError};

use super::{CollectiveError, Comm, ReplayTurns};
use crate::collective::op::Op;
use crate::collective::{AbortState, CommCause, CommFailure, ElementKind, Names};
use crate::cpu::{self, PartBytes};
use crate::error::{Error, Result};

/// What a CPU group's failure names, and where it is recorded.
pub(crate) struct StageFailure {
    /// Where the first failure is recorded, with the deadline.
    pub(crate) abort: Arc<AbortState>,
    /// The rank's issue order, which the group runs in.
    pub(crate) order: Arc<super::IssueOrder>,
    /// This rank.
    pub(crate) rank: usize,
    /// The pipeline and stage.
    pub(crate) names: Names,
}

impl StageFailure {
    /// The failure a CPU collective error is, naming the stage; `group` describes the
    /// stage's whole group.
    fn of(&self, error: CollectiveError, group: &str) -> CommFailure {
        let (operation, peer, cause) = match error {
            CollectiveError::Timeout {
                operation,
                peer,
                waiting_for,
                waited,
                ..
            } => (
                operation,
                peer,
                CommCause::Timeout {
                    waited,
                    waiting_for,
                },
            ),
            CollectiveError::PeerGone {
                operation, peer, ..
            } => (operation, Some(peer), CommCause::PeerGone { peer }),
            CollectiveError::Mismatch {
                operation, detail, ..
            } => (operation, None, CommCause::Mismatch { detail }),
            CollectiveError::Aborted { .. } => (
                group.to_owned(),
                None,
                CommCause::Aborted {
                    earlier: self
                        .abort
                        .failure()
                        .map_or_else(|| "an earlier failure".to_owned(), |f| f.to_string()),
                },
            ),
            other => (
                group.to_owned(),
                None,
                CommCause::Mismatch {
                    detail: other.to_string(),
                },
            ),
        };
        CommFailure {
            rank: self.rank,
            pipeline: self.names.pipeline,
            stage: self.names.stage,
            operation: format!("{operation} (of the stage's group: {group})"),
            peer,
            deadline: self.abort.deadline(),
            cause,
        }
    }
}

/// Enqueues a stage's group on `stream`: one stream operation over every range, which posts
/// the group's sends and receives together (as NCCL does), then runs its collectives in
/// statement order. `failure` names the stage in a failure's report.
pub(crate) fn enqueue_cpu_stage(
    comm: &Arc<Mutex<Comm>>,
    stream: &cpu::Stream,
    ops: &[(ElementKind, Op<cpu::Range>)],
    failure: StageFailure,
) -> Result<()> {
    let mut parts: Vec<cpu::Part> = Vec::new();
    let mut roles: Vec<(ElementKind, Op<usize>)> = Vec::with_capacity(ops.len());
    for (kind, op) in ops {
        let role = op.try_map(|range, writes| {
            parts.push(cpu::Part {
                range: range.clone(),
                access: if writes {
                    cpu::Access::Write
                } else {
                    cpu::Access::Read
                },
            });
            Ok::<_, Error>(parts.len() - 1)
        })?;
        roles.push((*kind, role));
    }
    let labels: Vec<String> = roles
        .iter()
        .map(|(kind, role)| role.statement(|&i| parts[i].range.describe(kind.size())))
        .collect();
    if let Some((a, b)) = cpu::overlapping_write(&parts) {
        return Err(Error::invalid(
            "communication",
            format!(
                "`{}` and `{}` overlap in one buffer, and one writes it",
                parts[a].range.describe(1),
                parts[b].range.describe(1)
            ),
        ));
    }
    let group = ops
        .iter()
        .map(|(kind, op)| op.describe(*kind, |range| range.bytes / kind.size()))
        .collect::<Vec<_>>()
        .join("; ");
    let comm = comm.clone();
    let roles: Arc<[(ElementKind, Op<usize>)]> = roles.into();
    // The group runs after every group of this rank enqueued before it (`order.rs`):
    // enqueued eagerly, with the ticket it takes now; recorded into a graph, with the one
    // each launch of the graph takes when it is enqueued.
    let (eager, replays) = if stream.is_capturing() {
        let turns = Arc::new(ReplayTurns::new(failure.order.clone()));
        (None, Some(turns))
    } else {
        (Some(failure.order.ticket()), None)
    };
    let on_launch = replays
        .clone()
        .map(|turns| cpu::Keep::Object(Arc::new(cpu::OnLaunch(turns))));
    let eager = Mutex::new(eager);
    let work: cpu::PartsWork = Arc::new(move |slices: &mut [PartBytes<'_>]| {
        let ticket = match &replays {
            Some(turns) => turns.next(),
            None => eager.lock().unwrap_or_else(PoisonError::into_inner).take(),
        };
        if let Some(ticket) = &ticket
            && !ticket.wait_turn(failure.abort.deadline())
        {
            return Err(format!(
                "`{group}` waited longer than the communicator's deadline ({:?}) for a \
                 communication this rank enqueued before it, on another stream, to run",
                failure.abort.deadline()
            ));
        }
        // The operations under the lock only exchange bytes, so a poisoned lock carries no
        // broken state.
        let comm = comm.lock().unwrap_or_else(PoisonError::into_inner);
        // A replay after an abort is refused at once, naming the first failure.
        if let Some(refusal) = failure.abort.refusal(
            failure.rank,
            failure.names.pipeline,
            failure.names.stage,
            group.clone(),
        ) {
            return Err(cpu::communication_failed(refusal));
        }
        let outcome = comm.with_one_deadline(|comm| run_group(comm, &roles, slices));
        match outcome {
            Ok(()) => Ok(()),
            Err(GroupError::Collective(error)) => {
                let reported = failure.of(error, &group);
                // The first failure aborts the rank: its peers see it leave at once.
                failure.abort.record(reported.clone());
                comm.abort();
                Err(cpu::communication_failed(reported))
            }
            Err(GroupError::Parts(message)) => Err(message),
        }
    });
    Ok(stream.parts(labels.join("; "), parts, work, on_launch)?)
}

/// Part `r` read and part `w` written, at once (`r != w`).
fn read_write<'b>(
    slices: &'b mut [PartBytes<'_>],
    r: usize,
    w: usize,
) -> std::result::Result<(&'b [u8], &'b mut [u8]), String> {
    if r == w {
        return Err("a part is both read and written".to_owned());
    }
    let (low, high) = slices.split_at_mut(r.max(w));
    let (first, second) = (&mut low[r.min(w)], &mut high[0]);
    let (reader, writer) = if r < w {
        (first, second)
    } else {
        (second, first)
    };
    let read: &[u8] = match reader {
        PartBytes::Read(bytes) => bytes,
        PartBytes::Write(bytes) => bytes,
    };
    match writer {
        PartBytes::Write(bytes) => Ok((read, bytes)),
        PartBytes::Read(_) => Err("a written part was locked for reading".to_owned()),
    }
}

fn written<'b>(
    slices: &'b mut [PartBytes<'_>],
    i: usize,
) -> std::result::Result<&'b mut [u8], String> {
    match &mut slices[i] {
        PartBytes::Write(bytes) => Ok(bytes),
        PartBytes::Read(_) => Err("a written part was locked for reading".to_owned()),
    }
}

/// Why a CPU group's run failed: the communication, or the bookkeeping of its parts.
enum GroupError {
    Collective(CollectiveError),
    Parts(String),
}

impl From<String> for GroupError {
    fn from(message: String) -> Self {
        GroupError::Parts(message)
    }
}

impl From<CollectiveError> for GroupError {
    fn from(error: CollectiveError) -> Self {
        GroupError::Collective(error)
    }
}

/// One run of a stage's group on the CPU backend: the operations over the parts, by index.
fn run_group(
    comm: &Comm,
    roles: &[(ElementKind, Op<usize>)],
    slices: &mut [PartBytes<'_>],
) -> std::result::Result<(), GroupError> {
    // The send or receive of each part, if one.
    let p2p: Vec<Option<Op<usize>>> = (0..slices.len())
        .map(|i| {
            roles
                .iter()
                .map(|(_, role)| *role)
                .find(|role| match *role {
                    Op::Send { data, .. } | Op::Recv { data, .. } => data == i,
                    _ => false,
                })
        })
        .collect();
    if p2p.iter().any(Option::is_some) {
        let view: &mut [PartBytes<'_>] = &mut *slices;
        comm.group(move |g| {
            for (slice, role) in IntoIterator::into_iter(view).zip(&p2p) {
                match (role, slice) {
                    (Some(Op::Send { peer, .. }), PartBytes::Read(bytes)) => {
                        g.send_bytes(*peer, bytes)?
                    }
                    (Some(Op::Recv { peer, .. }), PartBytes::Write(bytes)) => {
                        g.recv_bytes(*peer, bytes)?
                    }
                    _ => {}
                }
            }
            Ok(())
        })?;
    }
    for &(kind, role) in roles {
        let result = match role {
            Op::Send { .. } | Op::Recv { .. } => Ok(()),
            Op::AllReduce { send, recv, op } => match send {
                Some(s) => {
                    let (send, recv) = read_write(slices, s, recv)?;
                    comm.all_reduce_bytes(kind, op, send, recv)
                }
                None => {
                    let data = written(slices, recv)?;
                    let send = data.to_vec();
                    comm.all_reduce_bytes(kind, op, &send, data)
                }
            },
            Op::Broadcast { send, recv, root } => {
                if let Some(s) = send
                    && comm.rank() == root
                {
                    let (send, recv) = read_write(slices, s, recv)?;
                    recv.copy_from_slice(send);
                }
                comm.broadcast_bytes(root, written(slices, recv)?)
            }
            Op::AllGather { send, recv } => {
                let (send, recv) = read_write(slices, send, recv)?;
                comm.all_gather_bytes(send, recv)
            }
            Op::ReduceScatter { send, recv, op } => {
                let (send, recv) = read_write(slices, send, recv)?;
                comm.reduce_scatter_bytes(kind, op, send, recv)
            }
        };
        result?;
    }
    Ok(())
}
