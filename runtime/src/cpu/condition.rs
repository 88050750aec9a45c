//! The conditions of the CPU backend's `while` and `if` nodes: the decisions the CUDA
//! condition kernels make (`runtime/kernels/conditions.cu`), on the same values.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::memory::{Held, Memory, lock_all};
use super::op::Keep;
use crate::vocab::access::{Access, BufferId};

/// The type of the value a device condition reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueKind {
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `u32`.
    U32,
}

/// What a conditional node tests.
#[derive(Clone, Debug)]
pub(crate) enum Condition {
    /// `value OP threshold`, on the first element of `value`; `op` numbered as the condition
    /// kernels number it (`>`, `>=`, `<`, `<=`, `==`, `!=`), `threshold` as bits.
    Compare {
        /// The allocation read.
        memory: Arc<Memory>,
        /// The element's byte offset in it.
        offset: usize,
        /// Its type.
        kind: ValueKind,
        /// The comparison.
        op: u32,
        /// The threshold's bits.
        threshold: u64,
    },
    /// The first element of a `u32` buffer itself: non-zero holds; a switch takes it as the
    /// number of the body to run.
    Value {
        /// The allocation read.
        memory: Arc<Memory>,
        /// The element's byte offset in it.
        offset: usize,
    },
    /// `counter % modulus == remainder` on a flag word.
    Every {
        /// The counter.
        counter: Arc<AtomicU64>,
        /// At least 1.
        modulus: u32,
        /// The remainder that selects.
        remainder: u32,
    },
}

fn compare<T: PartialOrd>(value: T, op: u32, threshold: T) -> bool {
    match op {
        0 => value > threshold,
        1 => value >= threshold,
        2 => value < threshold,
        3 => value <= threshold,
        4 => value == threshold,
        _ => value != threshold,
    }
}

impl Condition {
    /// The condition's value now: 1 or 0 for a comparison, the value itself for `Value`
    /// (non-zero holds).
    pub(super) fn value(&self) -> Result<u32, String> {
        match self {
            Condition::Value { memory, offset } => {
                let accesses = [(memory.clone(), Access::Read)];
                let locks = lock_all(&accesses)?;
                let bytes = locks[0]
                    .1
                    .bytes()
                    .get(*offset..*offset + 4)
                    .ok_or_else(|| "the condition's value lies outside its buffer".to_owned())?;
                Ok(u32::from_ne_bytes(bytes.try_into().map_err(|_| "4 bytes")?))
            }
            _ => self.holds().map(u32::from),
        }
    }

    /// Whether the condition holds now.
    fn holds(&self) -> Result<bool, String> {
        match self {
            Condition::Value { .. } => Ok(self.value()? != 0),
            Condition::Compare {
                memory,
                offset,
                kind,
                op,
                threshold,
            } => {
                let accesses = [(memory.clone(), Access::Read)];
                let locks = lock_all(&accesses)?;
                let bytes = locks[0].1.bytes();
                let at = |n: usize| {
                    bytes
                        .get(*offset..*offset + n)
                        .ok_or_else(|| "the condition's value lies outside its buffer".to_owned())
                };
                Ok(match kind {
                    ValueKind::F32 => {
                        let v = f32::from_ne_bytes(at(4)?.try_into().map_err(|_| "4 bytes")?);
                        compare(v, *op, f32::from_bits(*threshold as u32))
                    }
                    ValueKind::F64 => {
                        let v = f64::from_ne_bytes(at(8)?.try_into().map_err(|_| "8 bytes")?);
                        compare(v, *op, f64::from_bits(*threshold))
                    }
                    ValueKind::U32 => {
                        let v = u32::from_ne_bytes(at(4)?.try_into().map_err(|_| "4 bytes")?);
                        compare(v, *op, *threshold as u32)
                    }
                })
            }
            Condition::Every {
                counter,
                modulus,
                remainder,
            } => {
                let n = counter.load(Ordering::Acquire) as u32;
                Ok(n % (*modulus).max(1) == *remainder)
            }
        }
    }

    /// What it reads, for the race detector, and what a graph must keep for it.
    pub(super) fn touches(&self) -> (Option<BufferId>, Keep) {
        match self {
            Condition::Compare { memory, .. } => {
                (Some(memory.id()), Keep::Memory(Held::new(memory.clone())))
            }
            Condition::Value { memory, .. } => {
                (Some(memory.id()), Keep::Memory(Held::new(memory.clone())))
            }
            Condition::Every { counter, .. } => (None, Keep::Object(counter.clone())),
        }
    }
}
