//! The raw enqueue level: NCCL's types for the shared element kinds and operators, and the
//! one unsafe call per operation ([`Communicator::raw_enqueue`]) with the group calls around
//! it. Everything safe (`ops.rs`, `stage.rs`) checks its arguments first.

use std::ffi::{c_int, c_void};

use super::adapt::Span;
use super::comm::{Communicator, to_c_int};
use super::library::{Nccl, NcclVersion, nccl};
use super::sys::{self, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t};
use crate::collective::op::Op;
use crate::collective::{ElementKind, ReduceOp};
use crate::error::{Error, Result};
use crate::sys::CUdeviceptr;

/// NCCL's data type for an element kind.
pub(super) fn data_type(kind: ElementKind) -> ncclDataType_t {
    match kind {
        ElementKind::I8 => ncclDataType_t::INT8,
        ElementKind::U8 => ncclDataType_t::UINT8,
        ElementKind::I32 => ncclDataType_t::INT32,
        ElementKind::U32 => ncclDataType_t::UINT32,
        ElementKind::I64 => ncclDataType_t::INT64,
        ElementKind::U64 => ncclDataType_t::UINT64,
        ElementKind::F32 => ncclDataType_t::FLOAT32,
        ElementKind::F64 => ncclDataType_t::FLOAT64,
    }
}

/// NCCL's operator for a reduce op, after the shared check; `avg` needs NCCL 2.10.
pub(super) fn red_op(call: &'static str, op: ReduceOp, kind: ElementKind) -> Result<ncclRedOp_t> {
    op.check(kind).map_err(|m| Error::invalid(call, m))?;
    Ok(match op {
        ReduceOp::Sum => ncclRedOp_t::SUM,
        ReduceOp::Prod => ncclRedOp_t::PROD,
        ReduceOp::Max => ncclRedOp_t::MAX,
        ReduceOp::Min => ncclRedOp_t::MIN,
        ReduceOp::Avg => {
            let n = nccl()?;
            if n.version < 21000 {
                return Err(Error::invalid(
                    call,
                    format!(
                        "`avg` needs NCCL 2.10 or newer; the loaded one is {}",
                        NcclVersion::from_code(n.version)
                    ),
                ));
            }
            ncclRedOp_t::AVG
        }
    })
}

/// The raw enqueue level: device addresses, element counts and a raw stream. Everything above
/// (`ops.rs`) is built on these.
///
/// # Safety (every method)
/// - `stream` is a live stream of this communicator's context;
/// - every address is device memory of that context, valid for the element counts the
///   operation touches (`count`, or `count * size` for the gathered / scattered side), and
///   stays allocated, and untouched by the host, until the enqueued work completes (or, in a
///   capture, for as long as the graph may be launched);
/// - memory written (`recv`) is not read or written by other work that may run concurrently;
/// - the peers issue the matching operation with the same count and type (NCCL's contract;
///   a mismatch can hang or corrupt the received data).
impl Communicator {
    fn enqueue(
        &self,
        call: &'static str,
        f: impl FnOnce(&Nccl, ncclComm_t) -> ncclResult_t,
    ) -> Result<()> {
        let h = &self.handle;
        h.bind(call)?;
        h.with_raw(call, |raw| h.settle(call, raw, f(h.nccl, raw)))
    }

    fn peer(call: &'static str, peer: usize) -> Result<c_int> {
        to_c_int(call, "the peer", peer)
    }

    /// The one NCCL call of `op`, over elements of `kind`: the one place an operation meets
    /// NCCL. An in-place operation (`send: None`) passes its one span as both sides; the
    /// counts NCCL takes are `recv`'s (`all_reduce`, `broadcast`, `reduce_scatter`) or
    /// `send`'s (`all_gather`, whose `recv` holds `size` times it).
    pub(super) unsafe fn raw_enqueue(
        &self,
        call: &'static str,
        op: &Op<Span>,
        kind: ElementKind,
        stream: sys::cudaStream_t,
    ) -> Result<()> {
        let ty = data_type(kind);
        match *op {
            Op::Send { data, peer } => {
                let peer = Self::peer("ncclSend", peer)?;
                // SAFETY: the caller upholds the contract above.
                self.enqueue("ncclSend", |n, comm| unsafe {
                    (n.ncclSend)(dev(data.ptr), data.len, ty, peer, comm, stream)
                })
            }
            Op::Recv { data, peer } => {
                let peer = Self::peer("ncclRecv", peer)?;
                // SAFETY: the caller upholds the contract above.
                self.enqueue("ncclRecv", |n, comm| unsafe {
                    (n.ncclRecv)(dev(data.ptr), data.len, ty, peer, comm, stream)
                })
            }
            Op::AllReduce { send, recv, op } => {
                let (send, op) = (send.unwrap_or(recv), red_op(call, op, kind)?);
                // SAFETY: the caller upholds the contract above.
                self.enqueue("ncclAllReduce", |n, comm| unsafe {
                    (n.ncclAllReduce)(dev(send.ptr), dev(recv.ptr), recv.len, ty, op, comm, stream)
                })
            }
            Op::Broadcast { send, recv, root } => {
                let send = send.unwrap_or(recv);
                let root = to_c_int("ncclBroadcast", "the root", root)?;
                // SAFETY: the caller upholds the contract above.
                self.enqueue("ncclBroadcast", |n, comm| unsafe {
                    (n.ncclBroadcast)(
                        dev(send.ptr),
                        dev(recv.ptr),
                        recv.len,
                        ty,
                        root,
                        comm,
                        stream,
                    )
                })
            }
            Op::AllGather { send, recv } => {
                // SAFETY: the caller upholds the contract above.
                self.enqueue("ncclAllGather", |n, comm| unsafe {
                    (n.ncclAllGather)(dev(send.ptr), dev(recv.ptr), send.len, ty, comm, stream)
                })
            }
            Op::ReduceScatter { send, recv, op } => {
                let op = red_op(call, op, kind)?;
                // SAFETY: the caller upholds the contract above.
                self.enqueue("ncclReduceScatter", |n, comm| unsafe {
                    (n.ncclReduceScatter)(
                        dev(send.ptr),
                        dev(recv.ptr),
                        recv.len,
                        ty,
                        op,
                        comm,
                        stream,
                    )
                })
            }
        }
    }

    /// `ncclGroupStart`: later operations of this thread are held until
    /// [`raw_group_end`](Self::raw_group_end).
    pub(crate) fn raw_group_start(&self) -> Result<()> {
        let n = self.handle.nccl;
        // SAFETY: no arguments; it only raises this thread's group depth.
        n.check("ncclGroupStart", unsafe { (n.ncclGroupStart)() })
    }

    /// `ncclGroupEnd`: issues the operations held since the matching start.
    ///
    /// # Safety
    /// Every buffer and stream given to an operation since the matching start must still
    /// satisfy the raw level's contract: they are used from now on.
    pub(crate) unsafe fn raw_group_end(&self) -> Result<()> {
        let h = &self.handle;
        h.bind("ncclGroupEnd")?;
        h.with_raw("ncclGroupEnd", |raw| {
            // SAFETY: the caller vouches for the held operations' buffers and streams.
            let code = unsafe { (h.nccl.ncclGroupEnd)() };
            // Nonblocking: the group may still be being issued; wait for it (bounded).
            h.settle("ncclGroupEnd", raw, code)
        })
    }

    /// Runs `f` (a whole group, start to end) with the handle held, so the watchdog cannot
    /// abort the communicator between the group's operations and its end.
    pub(crate) fn holding<R>(
        &self,
        call: &'static str,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.handle.with_raw(call, |_| f())
    }
}

/// A device address as the pointer NCCL's prototypes take.
fn dev(ptr: CUdeviceptr) -> *mut c_void {
    ptr as usize as *mut c_void
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_kinds_and_operators_map_to_nccl_h() {
        let codes: Vec<i32> = ElementKind::ALL.iter().map(|&k| data_type(k).0).collect();
        // ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64, ncclFloat32,
        // ncclFloat64.
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 7, 8]);
        let call = "test";
        assert_eq!(red_op(call, ReduceOp::Sum, ElementKind::I32).unwrap().0, 0);
        assert_eq!(red_op(call, ReduceOp::Prod, ElementKind::U8).unwrap().0, 1);
        assert_eq!(red_op(call, ReduceOp::Max, ElementKind::F64).unwrap().0, 2);
        assert_eq!(red_op(call, ReduceOp::Min, ElementKind::I64).unwrap().0, 3);
        let err = red_op(call, ReduceOp::Avg, ElementKind::I32).unwrap_err();
        assert!(err.to_string().contains("floating-point"), "{err}");
    }
}
