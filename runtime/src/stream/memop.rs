//! Stream memory operations: write a flag word, or wait until it meets a condition, in
//! stream order and without a kernel.

use super::{Stream, StreamBackend, mixed};
use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::memory::flag::FlagStorage;
use crate::memory::{FlagCell, FlagWord};
use crate::sys;

/// When a wait completes, comparing the cell's word with the given value.
///
/// ```
/// use gpu_pipeline::{Context, FlagCell, Stream, WaitCondition};
/// let ctx = Context::cpu();
/// let (consumer, producer) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
/// let ready = FlagCell::<u32>::new(&ctx, 0)?;
/// // Waits until bit 2 is set, whatever the other bits hold.
/// consumer.wait_value_32(&ready, WaitCondition::And, 0b100)?;
/// producer.write_value_32(&ready, 0b110)?;
/// consumer.synchronize()?;
/// assert_eq!(ready.load(), 0b110);
/// assert_eq!(WaitCondition::default(), WaitCondition::GreaterOrEqual);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
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

    fn cpu(self) -> cpu::WaitCondition {
        match self {
            WaitCondition::GreaterOrEqual => cpu::WaitCondition::GreaterOrEqual,
            WaitCondition::Equal => cpu::WaitCondition::Equal,
            WaitCondition::And => cpu::WaitCondition::And,
            WaitCondition::Nor => cpu::WaitCondition::Nor,
        }
    }
}

/// One operation of a [`Stream::batch_mem_op`].
///
/// ```
/// use gpu_pipeline::{Context, FlagCell, MemOp, Stream, WaitCondition};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let (go, done) = (FlagCell::<u32>::new(&ctx, 0)?, FlagCell::<u64>::new(&ctx, 0)?);
/// go.store(1);
/// // One batch: wait for `go`, then publish `done`, with a barrier between.
/// stream.batch_mem_op(&[
///     MemOp::WaitValue32 { cell: &go, condition: WaitCondition::Equal, value: 1 },
///     MemOp::Barrier,
///     MemOp::WriteValue64 { cell: &done, value: 42 },
/// ])?;
/// stream.synchronize()?;
/// assert_eq!(done.load(), 42);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
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

impl<'a> MemOp<'a> {
    /// The cell's context and storage, for the checks and the backends.
    /// The cell the operation touches, with its context.
    pub(crate) fn cell(&self) -> Option<(&crate::Context, &FlagStorage)> {
        match self {
            MemOp::WaitValue32 { cell, .. } | MemOp::WriteValue32 { cell, .. } => {
                Some((cell.context(), cell.storage()))
            }
            MemOp::WaitValue64 { cell, .. } | MemOp::WriteValue64 { cell, .. } => {
                Some((cell.context(), cell.storage()))
            }
            MemOp::FlushRemoteWrites | MemOp::Barrier => None,
        }
    }

    /// The operation on CUDA words; `None` when a word is not CUDA memory.
    pub(crate) fn as_cuda(&self) -> Option<cuda::MemOp<'a>> {
        fn word(storage: &FlagStorage) -> Option<&std::sync::Arc<cuda::FlagWord>> {
            match storage {
                FlagStorage::Cuda(w) => Some(w),
                FlagStorage::Cpu(_) => None,
            }
        }
        Some(match *self {
            MemOp::WaitValue32 {
                cell,
                condition,
                value,
            } => cuda::MemOp::Wait32 {
                word: word(cell.storage())?,
                condition: condition.raw(),
                value,
            },
            MemOp::WriteValue32 { cell, value } => cuda::MemOp::Write32 {
                word: word(cell.storage())?,
                value,
            },
            MemOp::WaitValue64 {
                cell,
                condition,
                value,
            } => cuda::MemOp::Wait64 {
                word: word(cell.storage())?,
                condition: condition.raw(),
                value,
            },
            MemOp::WriteValue64 { cell, value } => cuda::MemOp::Write64 {
                word: word(cell.storage())?,
                value,
            },
            MemOp::FlushRemoteWrites => cuda::MemOp::FlushRemoteWrites,
            MemOp::Barrier => cuda::MemOp::Barrier,
        })
    }

    /// The operation on CPU-backend words; `None` when a word is not CPU-backend memory.
    pub(crate) fn as_cpu(&self) -> Option<cpu::MemOp> {
        let word = |storage: &FlagStorage| match storage {
            FlagStorage::Cpu(w) => Some(w.clone()),
            FlagStorage::Cuda(_) => None,
        };
        Some(match *self {
            MemOp::WaitValue32 {
                cell,
                condition,
                value,
            } => cpu::MemOp::Wait {
                word: word(cell.storage())?,
                condition: condition.cpu(),
                value: value.widen(),
                bits: 32,
            },
            MemOp::WriteValue32 { cell, value } => cpu::MemOp::Write {
                word: word(cell.storage())?,
                value: value.widen(),
                bits: 32,
            },
            MemOp::WaitValue64 {
                cell,
                condition,
                value,
            } => cpu::MemOp::Wait {
                word: word(cell.storage())?,
                condition: condition.cpu(),
                value,
                bits: 64,
            },
            MemOp::WriteValue64 { cell, value } => cpu::MemOp::Write {
                word: word(cell.storage())?,
                value,
                bits: 64,
            },
            MemOp::FlushRemoteWrites | MemOp::Barrier => cpu::MemOp::Fence,
        })
    }
}

impl Stream {
    /// Enqueues memory operations, checked against this stream's context and backend.
    fn mem_ops(&self, call: &'static str, label: &'static str, ops: &[MemOp<'_>]) -> Result<()> {
        for op in ops {
            if let Some((ctx, _)) = op.cell()
                && !self.ctx.shares_memory_with(ctx)
            {
                return Err(Error::mismatch(
                    call,
                    "the flag cell belongs to another context than the stream",
                ));
            }
        }
        match &self.backend {
            // One operation (every `write_value_*` / `wait_value_*`) allocates nothing.
            StreamBackend::Cuda(s) => match ops {
                [op] => s.mem_ops(&[op.as_cuda().ok_or_else(|| mixed(call, "flag cell"))?]),
                _ => {
                    let ops: Option<Vec<cuda::MemOp<'_>>> =
                        ops.iter().map(MemOp::as_cuda).collect();
                    s.mem_ops(&ops.ok_or_else(|| mixed(call, "flag cell"))?)
                }
            },
            StreamBackend::Cpu(s) => {
                if ops.is_empty() {
                    return Ok(());
                }
                let ops: Option<Vec<cpu::MemOp>> = ops.iter().map(MemOp::as_cpu).collect();
                let ops = ops.ok_or_else(|| mixed(call, "flag cell"))?;
                Ok(s.mem_ops(label, ops)?)
            }
        }
    }

    /// Writes `value` to `cell` once earlier work on the stream completes.
    pub fn write_value_32(&self, cell: &FlagCell<u32>, value: u32) -> Result<()> {
        let op = MemOp::WriteValue32 { cell, value };
        self.mem_ops("Stream::write_value_32", "write_value_32", &[op])
    }

    /// Writes a 64-bit `value` to `cell` once earlier work completes.
    pub fn write_value_64(&self, cell: &FlagCell<u64>, value: u64) -> Result<()> {
        let op = MemOp::WriteValue64 { cell, value };
        self.mem_ops("Stream::write_value_64", "write_value_64", &[op])
    }

    /// Makes later work wait until `cell` meets `condition` against `value`. On CUDA, while
    /// it waits for a value the host will store, store it before dropping memory, a module or
    /// a launched graph on that thread: those drops wait for the whole context, this stream
    /// included (see [`FlagCell`]).
    pub fn wait_value_32(
        &self,
        cell: &FlagCell<u32>,
        condition: WaitCondition,
        value: u32,
    ) -> Result<()> {
        let op = MemOp::WaitValue32 {
            cell,
            condition,
            value,
        };
        self.mem_ops("Stream::wait_value_32", "wait_value_32", &[op])
    }

    /// The 64-bit form of [`Stream::wait_value_32`].
    pub fn wait_value_64(
        &self,
        cell: &FlagCell<u64>,
        condition: WaitCondition,
        value: u64,
    ) -> Result<()> {
        let op = MemOp::WaitValue64 {
            cell,
            condition,
            value,
        };
        self.mem_ops("Stream::wait_value_64", "wait_value_64", &[op])
    }

    /// Enqueues several memory operations as one batch, in order.
    pub fn batch_mem_op(&self, ops: &[MemOp<'_>]) -> Result<()> {
        self.mem_ops("Stream::batch_mem_op", "batch_mem_op", ops)
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
}
