//! Stream memory operations on flag words: write a word, or wait until it meets a condition,
//! in stream order and without a kernel.

use std::sync::Arc;

use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys::{self, CUstreamBatchMemOpParams, CUstreamMemOpValueParams};

use super::keep::{self, Keep};
use super::{FlagWord, Stream};

/// One stream memory operation, on words of this backend. `condition` is a raw
/// `CU_STREAM_WAIT_VALUE_*` flag.
#[derive(Clone, Copy, Debug)]
pub(crate) enum MemOp<'a> {
    /// Wait until the word's low 32 bits meet `condition` against `value`.
    Wait32 {
        word: &'a Arc<FlagWord>,
        condition: u32,
        value: u32,
    },
    /// Write the word's low 32 bits.
    Write32 { word: &'a Arc<FlagWord>, value: u32 },
    /// Wait until the word meets `condition` against `value`.
    Wait64 {
        word: &'a Arc<FlagWord>,
        condition: u32,
        value: u64,
    },
    /// Write the word.
    Write64 { word: &'a Arc<FlagWord>, value: u64 },
    /// Make remote writes visible before later operations.
    FlushRemoteWrites,
    /// A memory barrier over the whole system.
    Barrier,
}

impl MemOp<'_> {
    /// The flag word the operation touches, if any.
    pub(crate) fn word(&self) -> Option<&Arc<FlagWord>> {
        match self {
            MemOp::Wait32 { word, .. }
            | MemOp::Write32 { word, .. }
            | MemOp::Wait64 { word, .. }
            | MemOp::Write64 { word, .. } => Some(word),
            MemOp::FlushRemoteWrites | MemOp::Barrier => None,
        }
    }

    /// The driver's encoding of the operation.
    pub(crate) fn encode(&self) -> CUstreamBatchMemOpParams {
        let value_op = |operation, address, value64, flags| CUstreamBatchMemOpParams {
            waitValue: CUstreamMemOpValueParams {
                operation,
                address,
                value64,
                flags,
                alias: 0,
            },
        };
        match *self {
            MemOp::Wait32 {
                word,
                condition,
                value,
            } => value_op(
                sys::CU_STREAM_MEM_OP_WAIT_VALUE_32,
                word.device_address(),
                u64::from(value),
                condition,
            ),
            MemOp::Write32 { word, value } => value_op(
                sys::CU_STREAM_MEM_OP_WRITE_VALUE_32,
                word.device_address(),
                u64::from(value),
                sys::CU_STREAM_WRITE_VALUE_DEFAULT,
            ),
            MemOp::Wait64 {
                word,
                condition,
                value,
            } => value_op(
                sys::CU_STREAM_MEM_OP_WAIT_VALUE_64,
                word.device_address(),
                value,
                condition,
            ),
            MemOp::Write64 { word, value } => value_op(
                sys::CU_STREAM_MEM_OP_WRITE_VALUE_64,
                word.device_address(),
                value,
                sys::CU_STREAM_WRITE_VALUE_DEFAULT,
            ),
            // The flush and barrier members are {operation, flags}: two u32s at the start.
            MemOp::FlushRemoteWrites => CUstreamBatchMemOpParams {
                pad: [
                    u64::from(sys::CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES),
                    0,
                    0,
                    0,
                    0,
                    0,
                ],
            },
            MemOp::Barrier => CUstreamBatchMemOpParams {
                pad: [u64::from(sys::CU_STREAM_MEM_OP_BARRIER), 0, 0, 0, 0, 0],
            },
        }
    }
}

impl Stream {
    /// Enqueues `ops` in order: one driver call for a single write or wait, a batch
    /// otherwise. The words are kept alive by the graph when the handle captures; outside a
    /// capture their `Drop` synchronizes the context first.
    pub(crate) fn mem_ops(&self, ops: &[MemOp<'_>]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let _gate = self.gate();
        if let Some(id) = self.capture_now()? {
            for word in ops.iter().filter_map(MemOp::word) {
                keep::keep(id, Keep::Object(word.clone()));
            }
        }
        let d = self.bind()?;
        let raw = self.raw();
        let code = match ops {
            [single] => single_op(d, raw, single),
            _ => {
                let mut params: Vec<CUstreamBatchMemOpParams> =
                    ops.iter().map(MemOp::encode).collect();
                let count = u32::try_from(params.len()).map_err(|_| {
                    Error::invalid("Stream::batch_mem_op", "more than u32::MAX operations")
                })?;
                // SAFETY: `params` holds `count` initialised ops the driver reads during the
                // call; every word they name outlives the ops, as said above; flags must be 0.
                let code = unsafe { (d.cuStreamBatchMemOp)(raw, count, params.as_mut_ptr(), 0) };
                ("cuStreamBatchMemOp", code)
            }
        };
        let (call, code) = code;
        check(call, code)
    }
}

/// One operation as its own driver call (a batch of one otherwise).
fn single_op(
    d: &crate::driver::Driver,
    raw: sys::CUstream,
    op: &MemOp<'_>,
) -> (&'static str, sys::CUresult) {
    // Each call: a live stream (the caller's) and the device address of a live flag word
    // (FlagWord's invariant), which outlives the operation (`mem_ops` keeps it in a capture;
    // outside one, its drop synchronizes the context first).
    match *op {
        MemOp::Write32 { word, value } => {
            let flags = sys::CU_STREAM_WRITE_VALUE_DEFAULT;
            // SAFETY: see above.
            let code =
                unsafe { (d.cuStreamWriteValue32)(raw, word.device_address(), value, flags) };
            ("cuStreamWriteValue32", code)
        }
        MemOp::Write64 { word, value } => {
            let flags = sys::CU_STREAM_WRITE_VALUE_DEFAULT;
            // SAFETY: see above.
            let code =
                unsafe { (d.cuStreamWriteValue64)(raw, word.device_address(), value, flags) };
            ("cuStreamWriteValue64", code)
        }
        MemOp::Wait32 {
            word,
            condition,
            value,
        } => {
            // SAFETY: see above.
            let code =
                unsafe { (d.cuStreamWaitValue32)(raw, word.device_address(), value, condition) };
            ("cuStreamWaitValue32", code)
        }
        MemOp::Wait64 {
            word,
            condition,
            value,
        } => {
            // SAFETY: see above.
            let code =
                unsafe { (d.cuStreamWaitValue64)(raw, word.device_address(), value, condition) };
            ("cuStreamWaitValue64", code)
        }
        MemOp::FlushRemoteWrites | MemOp::Barrier => {
            let mut params = [op.encode()];
            // SAFETY: one initialised op the driver reads during the call; flags must be 0.
            let code = unsafe { (d.cuStreamBatchMemOp)(raw, 1, params.as_mut_ptr(), 0) };
            ("cuStreamBatchMemOp", code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_and_barrier_encode_their_operation_in_the_first_word() {
        // SAFETY: reading the `operation` member of a union we filled through `pad`.
        let op = |m: MemOp<'_>| unsafe { m.encode().operation };
        assert_eq!(
            op(MemOp::FlushRemoteWrites),
            sys::CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES
        );
        assert_eq!(op(MemOp::Barrier), sys::CU_STREAM_MEM_OP_BARRIER);
    }
}
