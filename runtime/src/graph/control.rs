//! Device-side control flow in graphs: the conditions a `while` or `if` node tests, and the
//! state a `while` loop leaves behind (its iteration count, and whether it stopped at its
//! maximum).
//!
//! On CUDA a conditional node is preceded by one of the library's condition kernels
//! (`runtime/kernels/conditions.cu`), which reads the condition's value on the device and sets
//! the node's handle; a `while` body ends with the same kernel, so the loop never returns to
//! the host. The CPU backend's graph runner makes the same decisions on the same state word.
//! Conditional nodes need a CUDA 12.4 or newer driver ([`Error::Unsupported`] otherwise).

use std::sync::Arc;

use bytemuck::Pod;

use crate::context::Context;
use crate::cpu;
use crate::error::{Error, Result};
use crate::memory::alloc::DeviceAlloc;
use crate::memory::flag::FlagStorage;
use crate::memory::view::DeviceRegion;
use crate::memory::view::sealed::DeviceMemory as _;
use crate::memory::{DeviceSource, FlagCell};
pub use crate::vocab::condition::Comparison;

mod sealed {
    /// The condition kernel's value type: 0 `f32`, 1 `f64`, 2 `u32`.
    pub trait Sealed {
        const KIND: u8;
    }
    impl Sealed for f32 {
        const KIND: u8 = 0;
    }
    impl Sealed for f64 {
        const KIND: u8 = 1;
    }
    impl Sealed for u32 {
        const KIND: u8 = 2;
    }
}

/// The element types a condition can read on the device: `f32`, `f64` (a residual against a
/// tolerance) and `u32` (a flag a kernel sets).
///
/// ```
/// use gpu_pipeline::{Comparison, Condition, ConditionValue, Context, DeviceBuffer, Graph, Stream};
/// /// Tests `value[0] > threshold` on the device, for a residual of either precision.
/// fn above<T: ConditionValue>(value: &DeviceBuffer<T>, threshold: T) -> Condition {
///     Condition::compare(value, Comparison::Greater, threshold)
/// }
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let single = DeviceBuffer::from_slice(&stream, &[0.5f32])?;
/// let double = DeviceBuffer::from_slice(&stream, &[0.5f64])?;
/// let mut ran = DeviceBuffer::from_slice(&stream, &[0u32, 0])?;
/// let mut graph = Graph::new(&ctx)?;
/// // 0.5 > 1e-6 holds; 0.5 > 1.0 does not.
/// graph.add_if_node(&[], above(&single, 1e-6), |body| {
///     body.add_memset_u32_node(&[], &mut ran.slice_mut(0..1)?, 1).map(drop)
/// })?;
/// graph.add_if_node(&[], above(&double, 1.0), |body| {
///     body.add_memset_u32_node(&[], &mut ran.slice_mut(1..2)?, 1).map(drop)
/// })?;
/// graph.instantiate()?.launch(&stream)?;
/// drop(graph);
/// assert_eq!(ran.to_vec(&stream)?, [1, 0]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
///
/// Other element types are refused at compile time:
///
/// ```compile_fail
/// use gpu_pipeline::{Comparison, Condition, DeviceBuffer};
/// fn above(value: &DeviceBuffer<i64>) -> Condition {
///     Condition::compare(value, Comparison::Greater, 0i64)
/// }
/// ```
pub trait ConditionValue: sealed::Sealed + Pod {
    /// The value's bits, as the condition kernel takes the threshold.
    #[doc(hidden)]
    fn bits(self) -> u64;
}

impl ConditionValue for f32 {
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}

impl ConditionValue for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

impl ConditionValue for u32 {
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

/// Which condition kernel reads a `T`.
fn value_kind<T: ConditionValue>() -> cpu::ValueKind {
    match T::KIND {
        0 => cpu::ValueKind::F32,
        1 => cpu::ValueKind::F64,
        _ => cpu::ValueKind::U32,
    }
}

/// What a `while` or `if` node tests, each time it decides. It names the memory it reads
/// without borrowing it (the body may well write that memory); the graph keeps the memory
/// alive, as it keeps every buffer its nodes touch.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Comparison, Condition, Context, DeviceBuffer, Graph, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let residual = DeviceBuffer::from_slice(&stream, &[1.0f32])?;
/// let mut graph = Graph::new(&ctx)?;
/// // Loops while residual[0] > 1e-6, at most 100 times; the body here is empty.
/// let looping = graph.add_while_node(
///     &[],
///     Condition::compare(&residual, Comparison::Greater, 1e-6f32).named("residual > tol"),
///     100,
///     |_body| Ok(()),
/// )?;
/// let exec = graph.instantiate()?;
/// exec.launch(&stream)?;
/// stream.synchronize()?;
/// // Nothing in the body lowers the residual: the loop stopped at its maximum.
/// assert_eq!(looping.state().iterations(), 100);
/// assert!(exec.check_loops().is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Condition {
    pub(crate) test: Test,
    pub(crate) label: Option<String>,
    pub(crate) stage: Option<&'static str>,
}

/// The test itself.
#[derive(Clone, Debug)]
pub(crate) enum Test {
    /// The first element of the value compared with `threshold` (as bits).
    Compare {
        alloc: DeviceAlloc,
        offset: usize,
        len: usize,
        kind: cpu::ValueKind,
        comparison: Comparison,
        threshold: u64,
    },
    /// The first element of a `u32` itself.
    Value {
        alloc: DeviceAlloc,
        offset: usize,
        len: usize,
    },
    /// The value a kernel sets through a [`ConditionHandle`](crate::ConditionHandle).
    Kernel {
        /// The handle's words (`word[0]` is the value set), for the CPU backend and for the
        /// nodes of drivers before 12.8.
        alloc: DeviceAlloc,
        /// Where the words start in it.
        offset: usize,
        /// The handle's graph side (`None`: an eager handle, which no node may read).
        owner: Option<Arc<super::kernel_set::Owner>>,
    },
    /// `counter % modulus == remainder`.
    Every {
        ctx: Context,
        counter: FlagStorage,
        modulus: u32,
        remainder: u32,
    },
}

impl Test {
    /// The value's region (a `Compare` test).
    pub(crate) fn region(&self) -> Option<DeviceRegion<'_>> {
        match self {
            Test::Compare {
                alloc, offset, len, ..
            } => Some(DeviceRegion {
                alloc,
                offset: *offset,
                bytes: (*len).min(1) * kind_size(self),
                len: *len,
            }),
            Test::Value { alloc, offset, len } => Some(DeviceRegion {
                alloc,
                offset: *offset,
                bytes: (*len).min(1) * 4,
                len: *len,
            }),
            Test::Kernel { alloc, offset, .. } => Some(DeviceRegion {
                alloc,
                offset: *offset,
                bytes: 4,
                len: 1,
            }),
            Test::Every { .. } => None,
        }
    }
}

fn kind_size(test: &Test) -> usize {
    match test {
        Test::Compare {
            kind: cpu::ValueKind::F64,
            ..
        } => 8,
        _ => 4,
    }
}

impl Condition {
    /// Holds when the first element of `value` (a buffer or a view: slice it to test another
    /// element) compares to `threshold` as `comparison` says, read on the device each time
    /// the node decides.
    pub fn compare<T: ConditionValue>(
        value: &impl DeviceSource<T>,
        comparison: Comparison,
        threshold: T,
    ) -> Condition {
        let region = value.device_region();
        Condition {
            test: Test::Compare {
                alloc: region.alloc.clone(),
                offset: region.offset,
                len: region.len,
                kind: value_kind::<T>(),
                comparison,
                threshold: threshold.bits(),
            },
            label: None,
            stage: None,
        }
    }

    /// The first element of `value` itself, read on the device each time the node decides:
    /// it holds when non-zero, and a switch ([`Graph::add_switch_node`](crate::Graph::add_switch_node))
    /// runs the body it names (none when it is not below the number of cases).
    pub fn value(value: &impl DeviceSource<u32>) -> Condition {
        let region = value.device_region();
        Condition {
            test: Test::Value {
                alloc: region.alloc.clone(),
                offset: region.offset,
                len: region.len,
            },
            label: None,
            stage: None,
        }
    }

    /// Holds when `counter % modulus == remainder`: with a counter the host writes before each
    /// launch (e.g. the replay number, [`Stream::write_value_32`](crate::Stream::write_value_32)),
    /// an `if` that runs on every `modulus`-th replay. `modulus` must be at least 1.
    pub fn every(counter: &FlagCell<u32>, modulus: u32, remainder: u32) -> Condition {
        Condition {
            test: Test::Every {
                ctx: counter.context().clone(),
                counter: counter.storage().clone(),
                modulus,
                remainder,
            },
            label: None,
            stage: None,
        }
    }

    /// The value a kernel sets itself through `handle` (a graph's handle, from
    /// [`Graph::condition_handle`](crate::Graph::condition_handle)): the node adds no condition
    /// kernel of the library. Non-zero holds; a switch runs the case the value names.
    pub fn set_by_kernel(handle: &crate::ConditionHandle) -> Condition {
        let region = handle.words().device_region();
        Condition {
            test: Test::Kernel {
                alloc: region.alloc.clone(),
                offset: region.offset,
                owner: handle.owner.clone(),
            },
            label: None,
            stage: None,
        }
    }

    /// Names the condition in errors (e.g. `"residual > tol"`).
    pub fn named(mut self, label: impl Into<String>) -> Condition {
        self.label = Some(label.into());
        self
    }

    /// Names the pipeline stage the condition's node belongs to: a loop of it that stops at
    /// its maximum is then reported as that stage's ([`LoopState::stage`]).
    pub fn in_stage(mut self, stage: &'static str) -> Condition {
        self.stage = Some(stage);
        self
    }

    /// The label errors use: the given name, or the test spelled out.
    pub(crate) fn label(&self) -> String {
        if let Some(label) = &self.label {
            return label.clone();
        }
        match &self.test {
            Test::Compare { comparison, .. } => format!("value {} threshold", comparison.symbol()),
            Test::Value { .. } | Test::Kernel { .. } => "value".to_owned(),
            Test::Every {
                modulus, remainder, ..
            } => format!("counter % {modulus} == {remainder}"),
        }
    }

    /// Checks the condition against the graph's context and its own rules.
    pub(crate) fn check(&self, call: &'static str, ctx: &Context) -> Result<()> {
        let owner = match &self.test {
            Test::Compare { alloc, len, .. } | Test::Value { alloc, len, .. } => {
                if *len == 0 {
                    return Err(Error::invalid(
                        call,
                        "the condition reads the first element of an empty buffer",
                    ));
                }
                &alloc.ctx
            }
            Test::Every {
                ctx: owner,
                modulus,
                remainder,
                ..
            } => {
                if *modulus == 0 {
                    return Err(Error::invalid(
                        call,
                        "`Condition::every` needs a modulus of at least 1",
                    ));
                }
                if remainder >= modulus {
                    return Err(Error::invalid(
                        call,
                        format!(
                            "`Condition::every` with remainder {remainder} of modulus {modulus} never holds; a remainder is below the modulus"
                        ),
                    ));
                }
                owner
            }
            Test::Kernel { owner: None, .. } => {
                return Err(Error::invalid(
                    call,
                    "`Condition::set_by_kernel` was given an eager handle (`ConditionHandle::eager`), \
                     which belongs to no graph; make the handle with `condition_handle` of the \
                     graph or body that gets the node",
                ));
            }
            Test::Kernel { alloc, .. } => &alloc.ctx,
        };
        if !ctx.shares_memory_with(owner) {
            return Err(Error::mismatch(
                call,
                "the condition reads memory of another context than the graph's",
            ));
        }
        Ok(())
    }
}

/// The state of one device `while` loop: how many iterations its last run made, and whether
/// a run stopped at the maximum with the condition still holding. It lives in a word of
/// device-mapped host memory that the loop's condition kernel writes; read it after the
/// launches you care about have completed (a synchronize).
#[derive(Clone)]
///
/// ```
/// use gpu_pipeline::{Comparison, Condition, Context, DeviceBuffer, Error, Graph, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let flag = DeviceBuffer::from_slice(&stream, &[1u32])?;
/// let mut graph = Graph::new(&ctx)?;
/// // Nothing in the body clears the flag: the loop runs into its maximum of 5.
/// let condition = Condition::compare(&flag, Comparison::NotEqual, 0u32).named("flag != 0");
/// let looping = graph.add_while_node(&[], condition, 5, |_body| Ok(()))?;
/// let exec = graph.instantiate()?;
/// exec.launch(&stream)?;
/// stream.synchronize()?;
/// let state = looping.state();
/// assert_eq!((state.iterations(), state.max_iterations()), (5, 5));
/// assert_eq!(state.label(), "flag != 0");
/// assert!(state.hit_limit());
/// assert!(matches!(state.check(), Err(Error::IterationLimit { .. })));
/// assert!(!state.hit_limit()); // `check` cleared the mark
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub struct LoopState {
    word: Arc<FlagCell<u64>>,
    label: Arc<str>,
    stage: Option<&'static str>,
    max_iterations: u32,
}

impl LoopState {
    /// A new state word (zero) for a loop.
    pub(crate) fn new(ctx: &Context, label: String, max_iterations: u32) -> Result<LoopState> {
        Ok(LoopState {
            // Only the graph's nodes write it.
            word: Arc::new(FlagCell::new_private(ctx, 0u64)?),
            label: Arc::from(label),
            stage: None,
            max_iterations,
        })
    }

    /// The state, reported as `stage`'s.
    pub(crate) fn in_stage(mut self, stage: Option<&'static str>) -> LoopState {
        self.stage = stage;
        self
    }

    /// The same word, under the label (and stage) of the node it belongs to.
    pub(crate) fn relabeled(&self, condition: &Condition) -> LoopState {
        LoopState {
            word: self.word.clone(),
            label: Arc::from(condition.label()),
            stage: condition.stage,
            max_iterations: self.max_iterations,
        }
    }

    /// The word, for the backends.
    pub(crate) fn storage(&self) -> &FlagStorage {
        self.word.storage()
    }

    /// How many iterations the last completed run of the loop made.
    pub fn iterations(&self) -> u32 {
        self.word.load() as u32
    }

    /// Whether a run since the last [`LoopState::check`] stopped at the maximum iteration
    /// count with its condition still holding.
    pub fn hit_limit(&self) -> bool {
        self.word.load() >> 32 != 0
    }

    /// The loop's maximum iteration count.
    pub fn max_iterations(&self) -> u32 {
        self.max_iterations
    }

    /// The loop's label (its condition).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The pipeline stage the loop belongs to, where its condition named one
    /// ([`Condition::in_stage`]; a generated pipeline's loops do).
    pub fn stage(&self) -> Option<&'static str> {
        self.stage
    }

    /// [`Error::IterationLimit`] when a run stopped at the maximum since the last check (the
    /// mark is cleared), `Ok` otherwise. Call it once the launches have completed.
    pub fn check(&self) -> Result<()> {
        let word = self.word.load();
        if word >> 32 == 0 {
            return Ok(());
        }
        self.word.store(word & u64::from(u32::MAX));
        Err(Error::IterationLimit {
            label: self.label.to_string(),
            max_iterations: self.max_iterations,
        })
    }
}

impl std::fmt::Debug for LoopState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopState")
            .field("label", &self.label)
            .field("iterations", &self.iterations())
            .field("hit_limit", &self.hit_limit())
            .field("max_iterations", &self.max_iterations)
            .finish()
    }
}
