//! Stream memory operations: write a flag word, or wait until it meets a condition, in
//! stream order and without a kernel.

use std::sync::Arc;

use super::Stream;
use crate::driver::check;
use crate::error::Result;
use crate::host::HostOp;
use crate::memory::FlagCell;
use crate::memory::alloc::KeepAlive;
use crate::memory::flag::FlagWordAlloc;
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

impl WaitCondition {
    /// Whether `word` satisfies the condition against `value`, as the device evaluates it
    /// (`GreaterOrEqual` compares cyclically: `(word - value) as signed >= 0`).
    pub(crate) fn holds(self, word: u64, value: u64, bits: u32) -> bool {
        let mask = if bits == 32 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        let (word, value) = (word & mask, value & mask);
        match self {
            WaitCondition::GreaterOrEqual => {
                let diff = word.wrapping_sub(value) & mask;
                diff >> (bits - 1) == 0
            }
            WaitCondition::Equal => word == value,
            WaitCondition::And => word & value != 0,
            WaitCondition::Nor => !(word | value) & mask != 0,
        }
    }
}

/// One memory operation in the host backend's terms: which word, what to do.
enum HostMemOp {
    Write {
        word: Arc<FlagWordAlloc>,
        value: u64,
        bits: u32,
    },
    Wait {
        word: Arc<FlagWordAlloc>,
        condition: WaitCondition,
        value: u64,
        bits: u32,
    },
    Fence,
}

impl HostMemOp {
    fn from_op(op: &MemOp<'_>) -> HostMemOp {
        match *op {
            MemOp::WaitValue32 {
                cell,
                condition,
                value,
            } => HostMemOp::Wait {
                word: cell.shared().clone(),
                condition,
                value: value.into(),
                bits: 32,
            },
            MemOp::WriteValue32 { cell, value } => HostMemOp::Write {
                word: cell.shared().clone(),
                value: value.into(),
                bits: 32,
            },
            MemOp::WaitValue64 {
                cell,
                condition,
                value,
            } => HostMemOp::Wait {
                word: cell.shared().clone(),
                condition,
                value,
                bits: 64,
            },
            MemOp::WriteValue64 { cell, value } => HostMemOp::Write {
                word: cell.shared().clone(),
                value,
                bits: 64,
            },
            MemOp::FlushRemoteWrites | MemOp::Barrier => HostMemOp::Fence,
        }
    }

    /// Runs on the stream's worker thread. A wait blocks that worker only, as a device wait
    /// blocks only its stream; it polls with a short sleep so it does not burn a core.
    fn run(&self) {
        match self {
            HostMemOp::Write {
                word,
                value,
                bits: 32,
            } => word.store(*value as u32),
            HostMemOp::Write { word, value, .. } => word.store(*value),
            HostMemOp::Wait {
                word,
                condition,
                value,
                bits,
            } => {
                let mut spins = 0_u32;
                loop {
                    let current = if *bits == 32 {
                        u64::from(word.load::<u32>())
                    } else {
                        word.load::<u64>()
                    };
                    if condition.holds(current, *value, *bits) {
                        break;
                    }
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::sleep(std::time::Duration::from_micros(50));
                    }
                }
            }
            HostMemOp::Fence => std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst),
        }
    }
}

impl Stream {
    /// Enqueues memory operations on the host backend as one replayable operation, or keeps
    /// their words alive in a CUDA capture; returns `true` when the host backend took them.
    fn host_mem_ops(&self, label: &'static str, ops: &[MemOp<'_>]) -> Result<bool> {
        let Some(h) = &self.host else {
            for op in ops {
                if let Some(word) = op.word() {
                    self.keep_alive_in_capture(|| KeepAlive::Object(word.clone()));
                }
            }
            return Ok(false);
        };
        let ops: Vec<HostMemOp> = ops.iter().map(HostMemOp::from_op).collect();
        h.enqueue(HostOp::replayable(label, move || {
            ops.iter().for_each(HostMemOp::run);
            Ok(())
        }))?;
        Ok(true)
    }

    /// Writes `value` to `cell` once earlier work on the stream completes.
    pub fn write_value_32(&self, cell: &FlagCell<u32>, value: u32) -> Result<()> {
        if self.host_mem_ops("write_value_32", &[MemOp::WriteValue32 { cell, value }])? {
            return Ok(());
        }
        let (c, raw) = self.cuda("Stream::write_value_32")?;
        // SAFETY: a live stream; the word outlives the op (its Drop synchronizes, and a
        // capture keeps it alive).
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
        if self.host_mem_ops("write_value_64", &[MemOp::WriteValue64 { cell, value }])? {
            return Ok(());
        }
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
        if self.host_mem_ops(
            "wait_value_32",
            &[MemOp::WaitValue32 {
                cell,
                condition,
                value,
            }],
        )? {
            return Ok(());
        }
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
        if self.host_mem_ops(
            "wait_value_64",
            &[MemOp::WaitValue64 {
                cell,
                condition,
                value,
            }],
        )? {
            return Ok(());
        }
        let (c, raw) = self.cuda("Stream::wait_value_64")?;
        // SAFETY: as in write_value_32.
        check("cuStreamWaitValue64", unsafe {
            (c.driver.cuStreamWaitValue64)(raw, cell.device_address(), value, condition.raw())
        })
    }

    /// Enqueues several memory operations as one batch, in order.
    pub fn batch_mem_op(&self, ops: &[MemOp<'_>]) -> Result<()> {
        if ops.is_empty() || self.host_mem_ops("batch_mem_op", ops)? {
            return Ok(());
        }
        let mut params: Vec<CUstreamBatchMemOpParams> = ops.iter().map(MemOp::encode).collect();
        let count = u32::try_from(params.len()).map_err(|_| {
            crate::Error::invalid("Stream::batch_mem_op", "more than u32::MAX operations")
        })?;
        let (c, raw) = self.cuda("Stream::batch_mem_op")?;
        // SAFETY: `params` holds `count` initialised ops the driver reads during the call;
        // every word they name outlives the ops; flags must be 0.
        check("cuStreamBatchMemOp", unsafe {
            (c.driver.cuStreamBatchMemOp)(raw, count, params.as_mut_ptr(), 0)
        })
    }
}

impl MemOp<'_> {
    fn word(&self) -> Option<&Arc<FlagWordAlloc>> {
        match self {
            MemOp::WaitValue32 { cell, .. } | MemOp::WriteValue32 { cell, .. } => {
                Some(cell.shared())
            }
            MemOp::WaitValue64 { cell, .. } | MemOp::WriteValue64 { cell, .. } => {
                Some(cell.shared())
            }
            MemOp::FlushRemoteWrites | MemOp::Barrier => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_conditions_match_the_device_definitions() {
        use WaitCondition::*;
        assert!(GreaterOrEqual.holds(5, 5, 32) && GreaterOrEqual.holds(6, 5, 32));
        assert!(!GreaterOrEqual.holds(4, 5, 32));
        // Cyclic: a counter that wrapped is still "after".
        assert!(GreaterOrEqual.holds(1, u64::from(u32::MAX), 32));
        assert!(GreaterOrEqual.holds(1, u64::MAX, 64));
        assert!(Equal.holds(7, 7, 64) && !Equal.holds(7, 8, 64));
        assert!(And.holds(0b110, 0b100, 32) && !And.holds(0b011, 0b100, 32));
        assert!(Nor.holds(0b01, 0b10, 32) && !Nor.holds(u64::from(u32::MAX), 0, 32));
    }

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
