//! The operations the crate's copies, memsets, host functions and stream memory operations
//! become on the CPU backend: each a replayable (or one-shot) [`Op`] that declares what it
//! touches and locks it while it runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::memory::{Memory, lock_all};
use super::op::{Keep, KernelArgValue, KernelFn, KernelTag, NodeKind, Op};
use super::stream::Stream;
use crate::vocab::access::{Access, Span};
use crate::vocab::fault::CpuFault;

/// A byte range of CPU-backend memory.
#[derive(Clone, Debug)]
pub(crate) struct Range {
    /// The allocation.
    pub(crate) memory: Arc<Memory>,
    /// Bytes from its start.
    pub(crate) offset: usize,
    /// Bytes covered.
    pub(crate) bytes: usize,
}

impl Range {
    /// The bytes it covers, for the race detector.
    pub(crate) fn span(&self) -> Span {
        Span::bytes(self.offset, self.bytes)
    }

    /// How labels name the range: the buffer's name, with the element range of a view.
    pub(crate) fn describe(&self, elem_size: usize) -> String {
        let name = self.memory.name();
        if self.offset == 0 && self.bytes == self.memory.bytes() || elem_size == 0 {
            return name.to_string();
        }
        let start = self.offset / elem_size;
        format!("{name}[{start}..{}]", start + self.bytes / elem_size)
    }

    fn end(&self) -> Result<usize, String> {
        self.offset
            .checked_add(self.bytes)
            .filter(|&end| end <= self.memory.bytes())
            .ok_or_else(|| format!("a range of `{}` lies outside it", self.memory.name()))
    }
}

impl Stream {
    /// Enqueues `op`, then records on the memory it touches whether it was captured (the
    /// free rule's input).
    pub(super) fn submit(&self, op: Op) -> Result<(), CpuFault> {
        let touched: Vec<Arc<Memory>> = op.touched().cloned().collect();
        let captured = self.enqueue_tracked(op)?;
        for memory in touched {
            memory.note_use(self.id(), captured);
        }
        Ok(())
    }

    /// Copies `src` to `dst` (as long), labelled `label` in reports.
    pub(crate) fn copy(&self, label: String, src: Range, dst: Range) -> Result<(), CpuFault> {
        self.submit(copy(label, src, dst))
    }

    /// Sets every byte of `dst` to `value`.
    pub(crate) fn memset_u8(&self, label: String, dst: Range, value: u8) -> Result<(), CpuFault> {
        self.submit(memset_u8(label, dst, value))
    }

    /// Sets every 32-bit word of `dst` to `value`.
    pub(crate) fn memset_u32(&self, label: String, dst: Range, value: u32) -> Result<(), CpuFault> {
        self.submit(memset_u32(label, dst, value))
    }

    /// Launches a kernel: `func` runs once with `args`; `keep` (the module) stays alive in a
    /// graph the launch is captured into.
    pub(crate) fn launch_kernel(
        &self,
        label: String,
        func: KernelFn,
        args: Vec<KernelArgValue>,
        tag: KernelTag,
        keep: Keep,
    ) -> Result<(), CpuFault> {
        self.submit(Op::kernel(label, func, args, tag).keep(keep))
    }

    /// Enqueues a repeatable host function.
    pub(crate) fn host_fn(&self, f: Arc<dyn Fn() + Send + Sync>) -> Result<(), CpuFault> {
        self.enqueue(host_fn(f))
    }

    /// Enqueues a one-shot host function; refused while the stream captures.
    pub(crate) fn host_fn_once(&self, f: Box<dyn FnOnce() + Send>) -> Result<(), CpuFault> {
        self.enqueue(host_fn_once(f))
    }

    /// Enqueues stream memory operations, run in order as one operation.
    pub(crate) fn mem_ops(&self, label: &'static str, ops: Vec<MemOp>) -> Result<(), CpuFault> {
        self.enqueue(mem_ops(label, ops))
    }
}

/// A copy of `src.bytes` bytes from `src` to `dst` (which must be as long).
pub(crate) fn copy(label: String, src: Range, dst: Range) -> Op {
    let accesses = vec![
        (src.memory.clone(), Access::Read),
        (dst.memory.clone(), Access::Write),
    ];
    let (from, to) = (src.clone(), dst.clone());
    Op::replayable(label, move || {
        let (src_end, dst_end) = (from.end()?, to.end()?);
        if src_end - from.offset != dst_end - to.offset {
            return Err("the source and destination lengths differ".to_owned());
        }
        let mut locks = lock_all(&accesses)?;
        if Arc::ptr_eq(&from.memory, &to.memory) {
            let (_, locked) = &mut locks[0];
            let bytes = locked
                .bytes_mut()
                .ok_or("the destination is not write-locked")?;
            bytes.copy_within(from.offset..src_end, to.offset);
            return Ok(());
        }
        let [(a, la), (_, lb)] = &mut locks[..] else {
            return Err("a copy locks two allocations".to_owned());
        };
        // `lock_all` orders the locks by id: find which one is the source.
        let (src_lock, dst_lock) = if std::ptr::eq(*a, &*from.memory) {
            (la, lb)
        } else {
            (lb, la)
        };
        let dst_bytes = dst_lock
            .bytes_mut()
            .ok_or("the destination is not write-locked")?;
        dst_bytes[to.offset..dst_end].copy_from_slice(&src_lock.bytes()[from.offset..src_end]);
        Ok(())
    })
    .touches_span(&src.memory, Access::Read, src.span())
    .touches_span(&dst.memory, Access::Write, dst.span())
    .kind(NodeKind::Memcpy)
}

/// Sets every byte of `dst` to `value`.
pub(crate) fn memset_u8(label: String, dst: Range, value: u8) -> Op {
    fill(label, dst, move |bytes| bytes.fill(value))
}

/// Sets every 32-bit word of `dst` (a whole number of words, 4-byte aligned) to `value`.
pub(crate) fn memset_u32(label: String, dst: Range, value: u32) -> Op {
    fill(label, dst, move |bytes| {
        for word in bytes.chunks_exact_mut(4) {
            word.copy_from_slice(&value.to_ne_bytes());
        }
    })
}

fn fill(label: String, dst: Range, fill: impl Fn(&mut [u8]) + Send + Sync + 'static) -> Op {
    let accesses = vec![(dst.memory.clone(), Access::Write)];
    let target = dst.clone();
    Op::replayable(label, move || {
        let end = target.end()?;
        let mut locks = lock_all(&accesses)?;
        let (_, locked) = &mut locks[0];
        let bytes = locked
            .bytes_mut()
            .ok_or("the destination is not write-locked")?;
        fill(&mut bytes[target.offset..end]);
        Ok(())
    })
    .touches_span(&dst.memory, Access::Write, dst.span())
    .kind(NodeKind::Memset)
}

/// A repeatable host function: runs once per execution, including every graph replay.
pub(crate) fn host_fn(f: Arc<dyn Fn() + Send + Sync>) -> Op {
    Op::replayable("host function", move || {
        f();
        Ok(())
    })
    .host_function()
}

/// A one-shot host function (not capturable).
pub(crate) fn host_fn_once(f: Box<dyn FnOnce() + Send>) -> Op {
    Op::once("host function", move || {
        f();
        Ok(())
    })
    .host_function()
}

/// A flag word: the CPU backend's stand-in for a device-mapped host word.
pub(crate) type FlagWord = Arc<AtomicU64>;

/// When a wait completes, comparing the word with the value (CUDA's definitions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitCondition {
    /// `(word - value) as signed >= 0`, cyclically.
    GreaterOrEqual,
    /// `word == value`.
    Equal,
    /// `(word & value) != 0`.
    And,
    /// `!(word | value) != 0`.
    Nor,
}

impl WaitCondition {
    /// Whether `word` satisfies the condition against `value`, as the device evaluates it on
    /// `bits`-bit words.
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

/// One stream memory operation on CPU-backend flag words.
#[derive(Clone, Debug)]
pub(crate) enum MemOp {
    /// Write the low `bits` bits of the word.
    Write {
        word: FlagWord,
        value: u64,
        bits: u32,
    },
    /// Wait until the word meets `condition` against `value`.
    Wait {
        word: FlagWord,
        condition: WaitCondition,
        value: u64,
        bits: u32,
    },
    /// A memory fence.
    Fence,
}

impl MemOp {
    /// Runs on the stream's worker thread. A wait blocks that worker only, as a device wait
    /// blocks only its stream; it polls with a short sleep so it does not burn a core.
    fn run(&self) {
        match self {
            // A 32-bit cell reads only the low half, which holds the value either way.
            MemOp::Write { word, value, bits } => {
                let value = if *bits == 32 {
                    *value & u64::from(u32::MAX)
                } else {
                    *value
                };
                word.store(value, Ordering::Release)
            }
            MemOp::Wait {
                word,
                condition,
                value,
                bits,
            } => {
                let mut spins = 0_u32;
                while !condition.holds(word.load(Ordering::Acquire), *value, *bits) {
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::sleep(std::time::Duration::from_micros(50));
                    }
                }
            }
            MemOp::Fence => std::sync::atomic::fence(Ordering::SeqCst),
        }
    }
}

/// Memory operations run in order as one replayable operation.
pub(crate) fn mem_ops(label: &'static str, ops: Vec<MemOp>) -> Op {
    Op::replayable(label, move || {
        ops.iter().for_each(MemOp::run);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_match_the_device_definitions() {
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
}
