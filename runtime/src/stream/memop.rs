//! Stream memory operations: write a flag word, or wait until it meets a condition, in
//! stream order and without a kernel.

use super::Stream;
use crate::error::{Result, check};
use crate::memory::FlagCell;
use crate::sys::{self, CUstreamBatchMemOpParams, CUstreamMemOpValueParams};

/// When a wait completes, comparing the cell's word with the given value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WaitCondition {
    /// `(word as signed) >= value`, cyclically, as CUDA defines it: the usual choice for counters.
    #[default]
    GreaterOrEqual,
    /// `word == value`.
    Equal,
    /// `(word & value) != 0`.
    And,
    /// `!(word | value) != 0`.
    Nor,
}

impl WaitCondition {
    fn raw(self) -> u32 {
        match self {
            WaitCondition::GreaterOrEqual => sys::CU_STREAM_WAIT_VALUE_GEQ,
            WaitCondition::Equal => sys::CU_STREAM_WAIT_VALUE_EQ,
            WaitCondition::And => sys::CU_STREAM_WAIT_VALUE_AND,
            WaitCondition::Nor => sys::CU_STREAM_WAIT_VALUE_NOR,
        }
    }
}

/// One operation of a [`Stream::batch_mem_op`].
#[derive(Clone, Copy, Debug)]
pub enum MemOp<'a> {
    /// Wait on a 32-bit cell.
    WaitValue32 {
        /// The cell.
        cell: &'a FlagCell<u32>,
        /// The comparison.
        condition: WaitCondition,
        /// The value compared with.
        value: u32,
    },
    /// Write a 32-bit cell.
    WriteValue32 {
        /// The cell.
        cell: &'a FlagCell<u32>,
        /// The value written.
        value: u32,
    },
    /// Wait on a 64-bit cell.
    WaitValue64 {
        /// The cell.
        cell: &'a FlagCell<u64>,
        /// The comparison.
        condition: WaitCondition,
        /// The value compared with.
        value: u64,
    },
    /// Write a 64-bit cell.
    WriteValue64 {
        /// The cell.
        cell: &'a FlagCell<u64>,
        /// The value written.
        value: u64,
    },
    /// Make remote writes visible before later operations (`FLUSH_REMOTE_WRITES`).
    FlushRemoteWrites,
    /// A memory barrier over the whole system (`CU_STREAM_MEM_OP_BARRIER`).
    Barrier,
}

impl MemOp<'_> {
    fn encode(&self) -> CUstreamBatchMemOpParams {
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
            MemOp::WaitValue32 {
                cell,
                condition,
                value,
            } => value_op(
                sys::CU_STREAM_MEM_OP_WAIT_VALUE_32,
                cell.device_address(),
                u64::from(value),
                condition.raw(),
            ),
            MemOp::WriteValue32 { cell, value } => value_op(
                sys::CU_STREAM_MEM_OP_WRITE_VALUE_32,
                cell.device_address(),
                u64::from(value),
                sys::CU_STREAM_WRITE_VALUE_DEFAULT,
            ),
            MemOp::WaitValue64 {
                cell,
                condition,
                value,
            } => value_op(
                sys::CU_STREAM_MEM_OP_WAIT_VALUE_64,
                cell.device_address(),
                value,
                condition.raw(),
            ),
            MemOp::WriteValue64 { cell, value } => value_op(
                sys::CU_STREAM_MEM_OP_WRITE_VALUE_64,
                cell.device_address(),
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
    /// Writes `value` to `cell` once earlier work on the stream completes.
    pub fn write_value_32(&self, cell: &FlagCell<u32>, value: u32) -> Result<()> {
        let (c, raw) = self.cuda("Stream::write_value_32")?;
        // SAFETY: a live stream; the cell outlives the op (its Drop synchronizes).
        check("cuStreamWriteValue32", unsafe {
            (c.driver.cuStreamWriteValue32)(
                raw,
                cell.device_address(),
                value,
                sys::CU_STREAM_WRITE_VALUE_DEFAULT,
            )
        })
    }

    /// Writes a 64-bit `value` to `cell` once earlier work completes.
    pub fn write_value_64(&self, cell: &FlagCell<u64>, value: u64) -> Result<()> {
        let (c, raw) = self.cuda("Stream::write_value_64")?;
        // SAFETY: as in write_value_32.
        check("cuStreamWriteValue64", unsafe {
            (c.driver.cuStreamWriteValue64)(
                raw,
                cell.device_address(),
                value,
                sys::CU_STREAM_WRITE_VALUE_DEFAULT,
            )
        })
    }

    /// Makes later work wait until `cell` meets `condition` against `value`.
    pub fn wait_value_32(
        &self,
        cell: &FlagCell<u32>,
        condition: WaitCondition,
        value: u32,
    ) -> Result<()> {
        let (c, raw) = self.cuda("Stream::wait_value_32")?;
        // SAFETY: as in write_value_32.
        check("cuStreamWaitValue32", unsafe {
            (c.driver.cuStreamWaitValue32)(raw, cell.device_address(), value, condition.raw())
        })
    }

    /// The 64-bit form of [`Stream::wait_value_32`].
    pub fn wait_value_64(
        &self,
        cell: &FlagCell<u64>,
        condition: WaitCondition,
        value: u64,
    ) -> Result<()> {
        let (c, raw) = self.cuda("Stream::wait_value_64")?;
        // SAFETY: as in write_value_32.
        check("cuStreamWaitValue64", unsafe {
            (c.driver.cuStreamWaitValue64)(raw, cell.device_address(), value, condition.raw())
        })
    }

    /// Enqueues several memory operations as one batch, in order.
    pub fn batch_mem_op(&self, ops: &[MemOp<'_>]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut params: Vec<CUstreamBatchMemOpParams> = ops.iter().map(MemOp::encode).collect();
        let count = u32::try_from(params.len()).map_err(|_| {
            crate::Error::invalid("Stream::batch_mem_op", "more than u32::MAX operations")
        })?;
        let (c, raw) = self.cuda("Stream::batch_mem_op")?;
        // SAFETY: `params` holds `count` initialised ops the driver reads during the call;
        // every cell they name outlives the ops; flags must be 0.
        check("cuStreamBatchMemOp", unsafe {
            (c.driver.cuStreamBatchMemOp)(raw, count, params.as_mut_ptr(), 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_map_to_driver_flags() {
        assert_eq!(WaitCondition::GreaterOrEqual.raw(), 0);
        assert_eq!(WaitCondition::Equal.raw(), 1);
        assert_eq!(WaitCondition::And.raw(), 2);
        assert_eq!(WaitCondition::Nor.raw(), 3);
    }

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
