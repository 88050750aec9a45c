//! The communication operations, once: what each one is, which ranges it reads and writes,
//! which peer it names, what its arguments must satisfy and how it reads in a report.
//!
//! [`Op`] is generic over the range type, so every layer keeps its own spelling of a range
//! and shares everything else: a pipeline statement's range of a buffer
//! (`pipeline/collective.rs`), NCCL's checked device span (`nccl/ops.rs`, `nccl/stage.rs`)
//! and a CPU-backend part index (`cpu/collective/stage.rs`). Adding an operation adds a
//! variant here and one arm in each backend's issue (`nccl/comm.rs`'s `raw_enqueue`, the CPU
//! stage's `run_group`); the compiler lists every other match to extend.
//!
//! The rules of [`Op::check`] are the ones both backends share (peers and roots are ranks,
//! the two sides have the lengths the operation needs, `avg` reduces floats); each backend
//! adds only what its ranges need (inside their buffer, memory of the right device).
#![forbid(unsafe_code)]

use std::fmt;

use super::{ElementKind, ReduceOp};

/// One communication operation over ranges of type `R`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op<R> {
    /// Sends `data` to `peer`.
    Send {
        /// Read.
        data: R,
        /// The receiving rank.
        peer: usize,
    },
    /// Receives into `data` from `peer`.
    Recv {
        /// Written.
        data: R,
        /// The sending rank.
        peer: usize,
    },
    /// Reduces every rank's `send` with `op` into every rank's `recv` (same length);
    /// `send: None` is in place.
    AllReduce {
        /// Read (`None`: `recv` is read).
        send: Option<R>,
        /// Written.
        recv: R,
        /// The operator.
        op: ReduceOp,
    },
    /// Copies `root`'s `send` into every rank's `recv` (same length); `send: None` is in
    /// place.
    Broadcast {
        /// Read on the root (`None`: `recv` is read).
        send: Option<R>,
        /// Written.
        recv: R,
        /// The sending rank.
        root: usize,
    },
    /// Gathers every rank's `send` into every rank's `recv`, in rank order: `recv` holds
    /// `size` times `send`.
    AllGather {
        /// Read.
        send: R,
        /// Written.
        recv: R,
    },
    /// Reduces `send` with `op` and leaves rank `r`'s block in rank `r`'s `recv`: `send`
    /// holds `size` times `recv`.
    ReduceScatter {
        /// Read.
        send: R,
        /// Written.
        recv: R,
        /// The operator.
        op: ReduceOp,
    },
}

/// The words a backend's messages use for an operation's two sides, and their unit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sides {
    /// The side read, e.g. `send buffer`.
    pub(crate) send: &'static str,
    /// The side written, e.g. `receive buffer`.
    pub(crate) recv: &'static str,
    /// What lengths count, e.g. `elements`.
    pub(crate) unit: &'static str,
}

/// Buffers or views given to an NCCL call.
pub(crate) const BUFFERS: Sides = Sides {
    send: "send buffer",
    recv: "receive buffer",
    unit: "elements",
};

/// Ranges of a stage's NCCL group.
pub(crate) const RANGES: Sides = Sides {
    send: "send range",
    recv: "receive range",
    unit: "elements",
};

/// The two sides of a pipeline statement (`SRC -> DST`).
pub(crate) const STATEMENT: Sides = Sides {
    send: "source",
    recv: "destination",
    unit: "elements",
};

/// Byte slices of the CPU backend's `Comm`.
pub(crate) const BYTES: Sides = Sides {
    send: "send buffer",
    recv: "receive buffer",
    unit: "bytes",
};

/// `rank` is one of `size` ranks; `what` names it (`peer`, `root`).
pub(crate) fn check_rank(what: &str, rank: usize, size: usize) -> Result<(), String> {
    if rank < size {
        Ok(())
    } else {
        Err(format!(
            "{what} {rank} is not one of the communicator's {size} ranks"
        ))
    }
}

/// Both sides hold as many elements.
pub(crate) fn same_len(sides: Sides, send: usize, recv: usize) -> Result<(), String> {
    if send == recv {
        Ok(())
    } else {
        Err(format!(
            "the {} has {send} {unit} and the {} {recv}; they must be equal",
            sides.send,
            sides.recv,
            unit = sides.unit
        ))
    }
}

/// The gathered side (`recv` of `all_gather`) holds `size` times the other.
pub(crate) fn gathered(sides: Sides, send: usize, recv: usize, size: usize) -> Result<(), String> {
    if Some(recv) == send.checked_mul(size) {
        Ok(())
    } else {
        Err(format!(
            "the {} must hold {size} ranks times the {send} {unit} sent, but has {recv}",
            sides.recv,
            unit = sides.unit
        ))
    }
}

/// The scattered side (`send` of `reduce_scatter`) holds `size` times the other.
pub(crate) fn scattered(sides: Sides, send: usize, recv: usize, size: usize) -> Result<(), String> {
    if Some(send) == recv.checked_mul(size) {
        Ok(())
    } else {
        Err(format!(
            "the {} must hold {size} ranks times the {recv} {unit} received, but has {send}",
            sides.send,
            unit = sides.unit
        ))
    }
}

impl<R> Op<R> {
    /// The peer of a send or receive.
    pub(crate) fn peer(&self) -> Option<usize> {
        match *self {
            Op::Send { peer, .. } | Op::Recv { peer, .. } => Some(peer),
            _ => None,
        }
    }

    /// The reduction operator, if the operation reduces.
    pub(crate) fn reduce_op(&self) -> Option<ReduceOp> {
        match *self {
            Op::AllReduce { op, .. } | Op::ReduceScatter { op, .. } => Some(op),
            _ => None,
        }
    }

    /// The ranges the operation touches, each with whether it writes it: the written side
    /// first, then the side read (an in-place operation has only the one).
    pub(crate) fn ranges(&self) -> Vec<(&R, bool)> {
        match self {
            Op::Send { data, .. } => vec![(data, false)],
            Op::Recv { data, .. } => vec![(data, true)],
            Op::AllReduce { send, recv, .. } | Op::Broadcast { send, recv, .. } => {
                let mut ranges = vec![(recv, true)];
                ranges.extend(send.iter().map(|s| (s, false)));
                ranges
            }
            Op::AllGather { send, recv } | Op::ReduceScatter { send, recv, .. } => {
                vec![(recv, true), (send, false)]
            }
        }
    }

    /// The same operation over other ranges: `f` gets each range with whether it is
    /// written, in the order of [`ranges`](Self::ranges).
    pub(crate) fn try_map<'r, S, E>(
        &'r self,
        mut f: impl FnMut(&'r R, bool) -> Result<S, E>,
    ) -> Result<Op<S>, E> {
        Ok(match self {
            Op::Send { data, peer } => Op::Send {
                data: f(data, false)?,
                peer: *peer,
            },
            Op::Recv { data, peer } => Op::Recv {
                data: f(data, true)?,
                peer: *peer,
            },
            Op::AllReduce { send, recv, op } => {
                let recv = f(recv, true)?;
                Op::AllReduce {
                    send: send.as_ref().map(|s| f(s, false)).transpose()?,
                    recv,
                    op: *op,
                }
            }
            Op::Broadcast { send, recv, root } => {
                let recv = f(recv, true)?;
                Op::Broadcast {
                    send: send.as_ref().map(|s| f(s, false)).transpose()?,
                    recv,
                    root: *root,
                }
            }
            Op::AllGather { send, recv } => {
                let recv = f(recv, true)?;
                Op::AllGather {
                    send: f(send, false)?,
                    recv,
                }
            }
            Op::ReduceScatter { send, recv, op } => {
                let recv = f(recv, true)?;
                Op::ReduceScatter {
                    send: f(send, false)?,
                    recv,
                    op: *op,
                }
            }
        })
    }

    /// The rules every backend shares, for elements of `kind` on a communicator of `size`
    /// ranks, with `len` the length of a range: peers and roots are ranks, the operator
    /// reduces `kind`, the two sides have the lengths the operation needs.
    ///
    /// A broadcast's send side is read on the root only: with `me` (this rank) its length is
    /// checked on the root only, as NCCL's own calls need; without, on every rank (a
    /// pipeline statement, which every rank runs alike).
    pub(crate) fn check(
        &self,
        kind: ElementKind,
        size: usize,
        me: Option<usize>,
        sides: Sides,
        len: impl Fn(&R) -> usize,
    ) -> Result<(), String> {
        if let Some(op) = self.reduce_op() {
            op.check(kind)?;
        }
        match self {
            Op::Send { peer, .. } | Op::Recv { peer, .. } => check_rank("peer", *peer, size),
            Op::AllReduce { send, recv, .. } => match send {
                Some(send) => same_len(sides, len(send), len(recv)),
                None => Ok(()),
            },
            Op::Broadcast { send, recv, root } => {
                check_rank("root", *root, size)?;
                match send {
                    Some(send) if me.is_none_or(|me| me == *root) => {
                        same_len(sides, len(send), len(recv))
                    }
                    _ => Ok(()),
                }
            }
            Op::AllGather { send, recv } => gathered(sides, len(send), len(recv), size),
            Op::ReduceScatter { send, recv, .. } => scattered(sides, len(send), len(recv), size),
        }
    }

    /// The operation in words with its counts, e.g. `send (4 f32) to rank 1` or
    /// `all_reduce(sum) (8 f64)`, for a failure's report.
    pub(crate) fn describe(&self, kind: ElementKind, len: impl Fn(&R) -> usize) -> String {
        match self {
            Op::Send { data, peer } => format!("send ({} {kind}) to rank {peer}", len(data)),
            Op::Recv { data, peer } => format!("recv ({} {kind}) from rank {peer}", len(data)),
            Op::AllReduce { recv, op, .. } => format!("all_reduce({op}) ({} {kind})", len(recv)),
            Op::Broadcast { recv, root, .. } => {
                format!("broadcast ({} {kind}) from rank {root}", len(recv))
            }
            Op::AllGather { send, .. } => format!("all_gather ({} {kind} each)", len(send)),
            Op::ReduceScatter { recv, op, .. } => {
                format!("reduce_scatter({op}) ({} {kind} each)", len(recv))
            }
        }
    }

    /// The operation as a statement over its ranges, each in words by `range`, e.g.
    /// `all_reduce(sum) a -> b` or `broadcast x from rank 0`.
    pub(crate) fn statement<D: fmt::Display>(&self, range: impl Fn(&R) -> D) -> String {
        match self {
            Op::Send { data, peer } => format!("send {} to rank {peer}", range(data)),
            Op::Recv { data, peer } => format!("recv {} from rank {peer}", range(data)),
            Op::AllReduce { send, recv, op } => match send {
                Some(s) => format!("all_reduce({op}) {} -> {}", range(s), range(recv)),
                None => format!("all_reduce({op}) {}", range(recv)),
            },
            Op::Broadcast { send, recv, root } => match send {
                Some(s) => format!("broadcast {} -> {} from rank {root}", range(s), range(recv)),
                None => format!("broadcast {} from rank {root}", range(recv)),
            },
            Op::AllGather { send, recv } => {
                format!("all_gather {} -> {}", range(send), range(recv))
            }
            Op::ReduceScatter { send, recv, op } => {
                format!("reduce_scatter({op}) {} -> {}", range(send), range(recv))
            }
        }
    }
}

/// The one peer of a group's operations, if they name exactly one.
pub(crate) fn one_peer<'o, R: 'o>(ops: impl IntoIterator<Item = &'o Op<R>>) -> Option<usize> {
    let mut peers = ops.into_iter().filter_map(Op::peer);
    let first = peers.next();
    first.filter(|&p| peers.all(|q| q == p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len(n: &usize) -> usize {
        *n
    }

    #[test]
    fn each_rule_names_what_to_fix() {
        let f32s = ElementKind::F32;
        let send = Op::Send { data: 4, peer: 2 };
        assert_eq!(
            send.check(f32s, 2, None, BUFFERS, len).unwrap_err(),
            "peer 2 is not one of the communicator's 2 ranks"
        );
        let reduce = Op::AllReduce {
            send: Some(3),
            recv: 4,
            op: ReduceOp::Sum,
        };
        assert_eq!(
            reduce.check(f32s, 2, None, STATEMENT, len).unwrap_err(),
            "the source has 3 elements and the destination 4; they must be equal"
        );
        let avg = Op::AllReduce {
            send: None,
            recv: 4,
            op: ReduceOp::Avg,
        };
        assert!(avg.check(ElementKind::I32, 2, None, BUFFERS, len).is_err());
        assert!(avg.check(f32s, 2, None, BUFFERS, len).is_ok());
        let gather = Op::AllGather { send: 2, recv: 3 };
        assert_eq!(
            gather.check(f32s, 2, None, BYTES, len).unwrap_err(),
            "the receive buffer must hold 2 ranks times the 2 bytes sent, but has 3"
        );
        let scatter = Op::ReduceScatter {
            send: 3,
            recv: 2,
            op: ReduceOp::Max,
        };
        assert_eq!(
            scatter.check(f32s, 2, None, RANGES, len).unwrap_err(),
            "the send range must hold 2 ranks times the 2 elements received, but has 3"
        );
        assert!(
            Op::AllGather {
                send: usize::MAX,
                recv: 0
            }
            .check(f32s, 2, None, BUFFERS, len)
            .is_err()
        );
    }

    #[test]
    fn a_broadcast_checks_its_send_side_on_the_root_or_everywhere() {
        let op = Op::Broadcast {
            send: Some(3),
            recv: 4,
            root: 0,
        };
        assert!(op.check(ElementKind::U8, 2, Some(1), BUFFERS, len).is_ok());
        assert!(op.check(ElementKind::U8, 2, Some(0), BUFFERS, len).is_err());
        assert!(op.check(ElementKind::U8, 2, None, BUFFERS, len).is_err());
        let far = Op::Broadcast {
            send: None,
            recv: 4,
            root: 5,
        };
        assert_eq!(
            far.check(ElementKind::U8, 2, None, BUFFERS, len)
                .unwrap_err(),
            "root 5 is not one of the communicator's 2 ranks"
        );
    }

    #[test]
    fn ranges_put_the_written_side_first_and_map_keeps_that_order() {
        let op = Op::ReduceScatter {
            send: 'a',
            recv: 'b',
            op: ReduceOp::Sum,
        };
        assert_eq!(op.ranges(), [(&'b', true), (&'a', false)]);
        let mut seen = Vec::new();
        let mapped = op
            .try_map(|r, writes| {
                seen.push((*r, writes));
                Ok::<_, ()>(seen.len())
            })
            .unwrap();
        assert_eq!(seen, [('b', true), ('a', false)]);
        assert!(matches!(
            mapped,
            Op::ReduceScatter {
                send: 2,
                recv: 1,
                ..
            }
        ));
        let in_place = Op::AllReduce {
            send: None,
            recv: 'x',
            op: ReduceOp::Min,
        };
        assert_eq!(in_place.ranges(), [(&'x', true)]);
    }

    #[test]
    fn operations_read_as_statements_and_counts() {
        let ops = [Op::Send { data: 4, peer: 1 }, Op::Recv { data: 4, peer: 1 }];
        assert_eq!(
            ops[0].describe(ElementKind::F32, len),
            "send (4 f32) to rank 1"
        );
        assert_eq!(
            ops[1].statement(|n| format!("x[..{n}]")),
            "recv x[..4] from rank 1"
        );
        assert_eq!(one_peer(&ops), Some(1));
        let reduce = Op::AllReduce {
            send: None,
            recv: 8,
            op: ReduceOp::Sum,
        };
        assert_eq!(
            reduce.describe(ElementKind::F64, len),
            "all_reduce(sum) (8 f64)"
        );
        assert_eq!(reduce.statement(|n| *n), "all_reduce(sum) 8");
        assert_eq!(
            one_peer(&[ops[0], reduce, Op::Recv { data: 1, peer: 0 }]),
            None
        );
    }
}
