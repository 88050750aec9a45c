//! Conditions a kernel sets itself: the handle of a `while`, `do ... while`, `if` or `switch`
//! node passed to a user kernel (a `SetsCondition` parameter), which decides with
//! `gp_set_condition` (`runtime/kernels/gpu_pipeline_condition.cuh`) instead of the library's
//! condition kernel: no extra node before the conditional or at the end of a loop's body.
//!
//! A [`ConditionHandle`] is made for one conditional node before the kernels that set it are
//! added (a kernel before the node sets the first test, as NVIDIA's samples do), by
//! [`Graph::condition_handle`](crate::Graph::condition_handle) (or a body's), and then given to
//! the node as [`Condition::set_by_kernel`](crate::Condition::set_by_kernel). An eager handle
//! ([`ConditionHandle::eager`]) belongs to no graph: a kernel launched on a stream writes the
//! value to the handle's word, which the host reads back ([`ConditionHandle::word`]).
//!
//! Soundness: a CUDA handle is only ever passed to kernel nodes of the scope that owns it or of
//! its node's bodies (checked when the node is added); a launch on a stream, or a kernel-node
//! update, refuses a graph's handle. The CPU backend's kernel receives a [`ConditionSetter`] over
//! the handle's word, and its graph runner reads that word.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, Ordering};

use bytemuck::{Pod, Zeroable};

use super::control::LoopState;
use crate::context::Context;
use crate::cpu::{CpuKernelArg, CpuParam};
use crate::error::{Error, Result};
use crate::launch::{ArgRef, KernelArg, KernelParam, ParamKind, ParamLayout, PassedAs};
use crate::memory::DeviceBuffer;
use crate::memory::alloc::DeviceAlloc;
use crate::memory::flag::FlagStorage;
use crate::memory::view::sealed::DeviceMemory as _;

pub use crate::vocab::condition::CONDITION_HEADER;

/// `gp_condition` as the kernel receives it (32 bytes, 8-aligned).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[doc(hidden)]
pub struct ConditionBytes {
    /// The conditional node's handle; 0 outside a graph.
    pub handle: u64,
    /// The device address of the handle's three words (value, iteration count, the count last
    /// written to the state word).
    pub word: u64,
    /// The device address of a loop's state word, or 0.
    pub state: u64,
    /// A loop's maximum iteration count.
    pub max_iterations: u32,
    /// Bit 0: the test before a loop's first iteration; bit 1: a loop.
    pub flags: u32,
}

const FIRST: u32 = 1;
const LOOP: u32 = 2;

/// The kind of conditional node a [`ConditionHandle`] is made for.
///
/// A `while` loop whose first test a kernel before the node sets, and each later test the
/// same kernel in the loop's body:
///
/// ```standalone_crate
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{
///     Condition, ConditionSetter, Context, CpuKernel, DeviceBuffer, Graph, HandleKind,
///     LaunchConfig, Module, SetsCondition, Stream,
/// };
///
/// // `gp_count_down(unsigned* n, gp_condition go)`: n[0] -= 1, go while n[0] > 0.
/// fn count_down(n: &mut [u32], mut go: ConditionSetter<'_>) {
///     n[0] -= 1;
///     go.set(u32::from(n[0] > 0));
/// }
///
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let module = Module::load_ptx(&ctx, include_str!("../../kernels/condition_kernels.ptx"))?;
/// // SAFETY: the kernel writes `n[0]` only and sets `go` from one thread, once per launch.
/// let count_down = unsafe {
///     module.function("gp_count_down")?.typed::<(&mut [u32], SetsCondition)>()?
/// }
/// .with_cpu(CpuKernel::new(count_down));
/// let mut n = DeviceBuffer::from_slice(&stream, &[3u32])?;
/// let mut graph = Graph::new(&ctx)?;
/// let kind = HandleKind::While { max_iterations: 10 };
/// let go = graph.condition_handle(kind)?;
/// assert_eq!(go.kind(), Some(kind));
/// // The first test: n = 3 becomes 2, which holds.
/// let one = LaunchConfig::new(1u32, 1u32);
/// let first = graph.add_kernel_node(&[], &count_down, one, (&mut n, &go))?;
/// // The node's maximum is the handle's.
/// let test = Condition::set_by_kernel(&go);
/// let looping = graph.add_while_node(&[first.node()], test, 10, |body| {
///     body.add_kernel_node(&[], &count_down, one, (&mut n, &go))?;
///     Ok(())
/// })?;
/// let exec = graph.instantiate()?;
/// exec.launch(&stream)?;
/// stream.synchronize()?;
/// exec.check_loops()?; // the loop stopped by itself, not at its maximum
/// assert_eq!(looping.state().iterations(), 2); // at n = 2 and n = 1
/// drop((exec, graph));
/// assert_eq!(n.to_vec(&stream)?, [0]);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleKind {
    /// A `while` node: a kernel before it sets the first test, one in its body each later one.
    While {
        /// The most iterations; then the loop stops and reports [`Error::IterationLimit`].
        max_iterations: u32,
    },
    /// A `do ... while` node: its body runs first (the handle starts each launch at 1, and in
    /// a body a kernel of the library sets it to 1 before the node), and a kernel in the body
    /// sets each test.
    DoWhile {
        /// As for `While`.
        max_iterations: u32,
    },
    /// An `if`, `if`/`else` or `switch` node: a kernel before it sets the value it decides on.
    Decision,
}

impl HandleKind {
    fn max_iterations(self) -> Option<u32> {
        match self {
            HandleKind::While { max_iterations } | HandleKind::DoWhile { max_iterations } => {
                Some(max_iterations)
            }
            HandleKind::Decision => None,
        }
    }
}

/// Where a graph's handle may be set from, and what its node became.
#[derive(Debug)]
pub(crate) struct Owner {
    /// The graph.
    pub(crate) graph: u64,
    /// The scope (graph or body) that holds the node.
    pub(crate) scope: u32,
    /// The CUDA handle (0 on the CPU backend).
    pub(crate) raw: u64,
    /// What it is for.
    pub(crate) kind: HandleKind,
    /// The loop's state word, for loops.
    pub(crate) state: Option<LoopState>,
    /// The scopes of its node's bodies, once the node is added (`None` before).
    pub(crate) bodies: Mutex<Option<Vec<u32>>>,
}

/// The value a kernel sets for one conditional node, or (eager) the word a kernel writes the
/// value to. Passed to a kernel for a [`SetsCondition`] parameter (by reference).
///
/// ```standalone_crate
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{
///     Condition, ConditionSetter, Context, CpuKernel, DeviceBuffer, Graph, HandleKind,
///     LaunchConfig, Module, SetsCondition, Stream,
/// };
///
/// // `gp_count_down(unsigned* n, gp_condition go)`: n[0] -= 1, go while n[0] > 0.
/// fn count_down(n: &mut [u32], mut go: ConditionSetter<'_>) {
///     n[0] -= 1;
///     go.set(u32::from(n[0] > 0));
/// }
///
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let module = Module::load_ptx(&ctx, include_str!("../../kernels/condition_kernels.ptx"))?;
/// // SAFETY: the kernel writes `n[0]` only and sets `go` from one thread, once per launch.
/// let count_down = unsafe {
///     module.function("gp_count_down")?.typed::<(&mut [u32], SetsCondition)>()?
/// }
/// .with_cpu(CpuKernel::new(count_down));
/// let mut n = DeviceBuffer::from_slice(&stream, &[3u32])?;
/// let mut graph = Graph::new(&ctx)?;
/// // The kernel in the body decides each test: no condition kernel of the library.
/// let go = graph.condition_handle(HandleKind::DoWhile { max_iterations: 10 })?;
/// let looping = graph.add_do_while_node(&[], Condition::set_by_kernel(&go), 10, |body| {
///     body.add_kernel_node(&[], &count_down, LaunchConfig::new(1u32, 1u32), (&mut n, &go))?;
///     Ok(())
/// })?;
/// let exec = graph.instantiate()?;
/// exec.launch(&stream)?;
/// stream.synchronize()?;
/// assert_eq!(looping.state().iterations(), 3);
/// drop((exec, graph));
/// assert_eq!(n.to_vec(&stream)?, [0]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ConditionHandle {
    /// Three words: the value last set, and (CUDA, in a graph loop) the iteration count and
    /// the count last written to the loop's state word.
    word: DeviceBuffer<u32>,
    /// Whether `word` may still be being zeroed on the legacy stream (a graph's handle on
    /// CUDA, until `word()` waited).
    zeroing: AtomicBool,
    /// `None` for an eager handle.
    pub(crate) owner: Option<Arc<Owner>>,
}

impl ConditionHandle {
    /// A handle of no graph, for eager steps: a kernel given it writes the value it sets to
    /// [`word`](ConditionHandle::word) (starting at 0), which the host reads back.
    pub fn eager(ctx: &Context) -> Result<ConditionHandle> {
        Ok(ConditionHandle {
            word: words(ctx)?,
            zeroing: AtomicBool::new(false),
            owner: None,
        })
    }

    /// A handle of scope `scope` of graph `graph`, with the CUDA handle `raw` (0 on the CPU
    /// backend).
    ///
    /// On CUDA its words are still being zeroed on the legacy stream: the caller tells the
    /// graph (`zeroed_on_legacy`), which waits before it is instantiated, and
    /// [`word`](ConditionHandle::word) waits before it lends them.
    pub(crate) fn owned(
        ctx: &Context,
        graph: u64,
        scope: u32,
        raw: u64,
        kind: HandleKind,
        state: Option<LoopState>,
    ) -> Result<ConditionHandle> {
        const CALL: &str = "Graph::condition_handle";
        Ok(ConditionHandle {
            word: DeviceBuffer::from_alloc(DeviceAlloc::new_zeroing(CALL, ctx, 12)?, 3),
            zeroing: AtomicBool::new(ctx.backend() == crate::Backend::Cuda),
            owner: Some(Arc::new(Owner {
                graph,
                scope,
                raw,
                kind,
                state,
                bodies: Mutex::new(None),
            })),
        })
    }

    /// The device words a kernel writes: element 0 is the value it set last (what an eager
    /// step reads back, and an `if` or a switch of a graph decides on), elements 1 and 2 a
    /// graph loop's iteration count on CUDA and the count last written to its state word (the
    /// loop's test does not write element 0).
    pub fn word(&self) -> &DeviceBuffer<u32> {
        // A graph's handle: its words are zeroed on the legacy stream, which the stream the
        // caller reads them on may not wait for.
        if self.zeroing.swap(false, Ordering::AcqRel)
            && let Err(e) = crate::memory::alloc::settle_zeroing(self.word.context())
        {
            tracing::warn!(error = %e, "waiting for a condition handle's words to be zeroed failed");
        }
        &self.word
    }

    /// What the handle was made for, for a graph's handle.
    pub fn kind(&self) -> Option<HandleKind> {
        self.owner.as_ref().map(|o| o.kind)
    }

    /// The state of the loop it decides (`None` for an eager handle or a decision).
    pub fn loop_state(&self) -> Option<&LoopState> {
        self.owner.as_ref().and_then(|o| o.state.as_ref())
    }

    /// Checks that a kernel node of scope `scope` of graph `graph` may set this handle: an
    /// eager handle anywhere (it only writes its word), a graph's handle only in the scope of
    /// its node (until the node is added) or in that node's bodies.
    pub(crate) fn check_setter(&self, call: &'static str, graph: u64, scope: u32) -> Result<()> {
        let Some(owner) = &self.owner else {
            return Ok(());
        };
        let bodies = owner.bodies.lock().unwrap_or_else(PoisonError::into_inner);
        if owner.graph == graph {
            match bodies.as_ref() {
                Some(bodies) if bodies.contains(&scope) => return Ok(()),
                None if owner.scope == scope => return Ok(()),
                // Beside its node, added already: it would run after the node decided, or
                // (a loop) be taken for a test of the loop's body.
                Some(_) if owner.scope == scope => {
                    return Err(Error::invalid(
                        call,
                        "a kernel sets a condition handle whose conditional node is added \
                         already: beside the node, a kernel sets it only before the node is \
                         added (and the node depends on it); a loop's later tests are set by \
                         kernels in its body",
                    ));
                }
                _ => {}
            }
        }
        Err(Error::invalid(
            call,
            "a kernel sets a condition handle of another graph, or of another scope: a handle is \
             set by kernel nodes of the graph or body that holds its conditional node (before \
             the node) or of that node's own bodies",
        ))
    }

    /// The value's memory and the handle, for the conditional node.
    pub(crate) fn words(&self) -> &DeviceBuffer<u32> {
        &self.word
    }

    /// The bytes the kernel receives: the handle, its words, and (for a loop) the state word,
    /// the maximum and whether this is the test before the first iteration (a kernel node
    /// added before the conditional node is).
    fn bytes(&self) -> ConditionBytes {
        let word = self.word.device_region().ptr().unwrap_or(0);
        let Some(owner) = &self.owner else {
            return ConditionBytes {
                word,
                ..ConditionBytes::default()
            };
        };
        let placed = owner
            .bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        let state = match owner.state.as_ref().map(LoopState::storage) {
            Some(FlagStorage::Cuda(w)) => w.device_address(),
            _ => 0,
        };
        let (max_iterations, flags) = match owner.kind.max_iterations() {
            Some(max) => (max, LOOP | if placed { 0 } else { FIRST }),
            None => (u32::MAX, 0),
        };
        ConditionBytes {
            handle: owner.raw,
            word,
            state,
            max_iterations,
            flags,
        }
    }
}

/// Three zeroed words on `ctx`.
fn words(ctx: &Context) -> Result<DeviceBuffer<u32>> {
    const CALL: &str = "ConditionHandle::new";
    Ok(DeviceBuffer::from_alloc(
        DeviceAlloc::new_zeroed(CALL, ctx, 12)?,
        3,
    ))
}

/// The parameter type, in a kernel signature, of a kernel that sets a condition: the CUDA
/// kernel takes a `gp_condition` by value (`gpu_pipeline_condition.cuh`), a CPU implementation
/// a [`ConditionSetter`]; a launch passes a `&ConditionHandle`.
///
/// Launched on a stream with an eager handle ([`ConditionHandle::eager`]), the kernel writes
/// the value it sets to the handle's word, which the host reads back:
///
/// ```standalone_crate
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{
///     ConditionHandle, ConditionSetter, Context, CpuKernel, DeviceBuffer, LaunchConfig, Module,
///     SetsCondition, Stream,
/// };
///
/// // `gp_set_to(const unsigned* value, gp_condition go)`: sets the condition to value[0].
/// fn set_to(value: &[u32], mut go: ConditionSetter<'_>) {
///     go.set(value[0]);
/// }
///
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let module = Module::load_ptx(&ctx, include_str!("../../kernels/condition_kernels.ptx"))?;
/// // SAFETY: the kernel reads `value[0]` only and sets `go` from one thread, once per launch.
/// let set_to = unsafe { module.function("gp_set_to")?.typed::<(&[u32], SetsCondition)>()? }
///     .with_cpu(CpuKernel::new(set_to));
/// let go = ConditionHandle::eager(&ctx)?;
/// assert_eq!(go.kind(), None); // of no graph
/// let value = DeviceBuffer::from_slice(&stream, &[7u32])?;
/// set_to.launch(&stream, LaunchConfig::new(1u32, 1u32), (&value, &go))?;
/// // Element 0: the value set; elements 1 and 2 count a graph loop's iterations on CUDA.
/// assert_eq!(go.word().to_vec(&stream)?, [7, 0, 0]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub enum SetsCondition {}

impl crate::launch::sealed::Param for SetsCondition {}
impl KernelParam for SetsCondition {
    const LAYOUT: ParamLayout = ParamLayout::of::<ConditionBytes>();
    // The CPU backend's kernel writes the handle's word.
    const WRITES: bool = true;
    const KIND: ParamKind = ParamKind::Scalar { index: None };
}

impl crate::launch::sealed::Arg for &ConditionHandle {}
impl KernelArg for &ConditionHandle {
    type Packed = ConditionBytes;
    #[inline]
    fn pack(&self) -> ConditionBytes {
        self.bytes()
    }
    fn arg_ref(&self) -> ArgRef<'_> {
        ArgRef::Buffer {
            region: self.word.device_region(),
            elem_size: 4,
        }
    }
    fn condition(&self) -> Option<&ConditionHandle> {
        Some(self)
    }
}
impl crate::launch::sealed::PassedAs<SetsCondition> for &ConditionHandle {}
impl PassedAs<SetsCondition> for &ConditionHandle {}

// `&mut` too, as the pipeline macro passes what a kernel writes.
impl crate::launch::sealed::Arg for &mut ConditionHandle {}
impl KernelArg for &mut ConditionHandle {
    type Packed = ConditionBytes;
    #[inline]
    fn pack(&self) -> ConditionBytes {
        self.bytes()
    }
    fn arg_ref(&self) -> ArgRef<'_> {
        ArgRef::Buffer {
            region: self.word.device_region(),
            elem_size: 4,
        }
    }
    fn condition(&self) -> Option<&ConditionHandle> {
        Some(self)
    }
}
impl crate::launch::sealed::PassedAs<SetsCondition> for &mut ConditionHandle {}
impl PassedAs<SetsCondition> for &mut ConditionHandle {}

/// What a kernel's CPU implementation receives for a [`SetsCondition`] parameter: it sets the
/// condition once per launch, as the CUDA kernel calls `gp_set_condition` once.
///
/// The CPU implementation of a kernel that picks a `switch` node's case, set before the
/// node; a value past the cases runs none:
///
/// ```standalone_crate
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{
///     Condition, ConditionSetter, Context, CpuKernel, DeviceBuffer, Graph, HandleKind,
///     LaunchConfig, Module, PinnedBuffer, SetsCondition, Stream,
/// };
///
/// // `gp_set_to(const unsigned* value, gp_condition go)`: sets the condition to value[0].
/// fn set_to_cpu(value: &[u32], mut go: ConditionSetter<'_>) {
///     go.set(value[0]);
/// }
/// // `gp_bump(unsigned* out)`: out[0] += 1.
/// fn bump_cpu(out: &mut [u32]) {
///     out[0] += 1;
/// }
///
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let module = Module::load_ptx(&ctx, include_str!("../../kernels/condition_kernels.ptx"))?;
/// // SAFETY: each kernel touches element 0 of its buffers only, and `gp_set_to` sets `go`
/// // from one thread, once per launch.
/// let set_to = unsafe { module.function("gp_set_to")?.typed::<(&[u32], SetsCondition)>()? }
///     .with_cpu(CpuKernel::new(set_to_cpu));
/// let bump = unsafe { module.function("gp_bump")?.typed::<(&mut [u32],)>()? }
///     .with_cpu(CpuKernel::new(bump_cpu));
/// let one = LaunchConfig::new(1u32, 1u32);
/// let mut value = DeviceBuffer::from_slice(&stream, &[0u32])?;
/// let mut counts = [
///     DeviceBuffer::from_slice(&stream, &[0u32])?,
///     DeviceBuffer::from_slice(&stream, &[0u32])?,
///     DeviceBuffer::from_slice(&stream, &[0u32])?,
/// ];
/// let mut graph = Graph::new(&ctx)?;
/// let pick = graph.condition_handle(HandleKind::Decision)?;
/// let set = graph.add_kernel_node(&[], &set_to, one, (&value, &pick))?;
/// graph.add_switch_node(&[set.node()], Condition::set_by_kernel(&pick), 3, |case, body| {
///     body.add_kernel_node(&[], &bump, one, (&mut counts[case],))?;
///     Ok(())
/// })?;
/// let exec = graph.instantiate()?;
/// for v in [2u32, 0, 2, 7] {
///     let staged = PinnedBuffer::from_slice(&ctx, &[v])?;
///     stream.copy_htod(&staged, &mut value)?;
///     exec.launch(&stream)?;
///     stream.synchronize()?;
/// }
/// drop((exec, graph));
/// let mut runs = Vec::new();
/// for count in &counts {
///     runs.push(count.to_vec(&stream)?[0]);
/// }
/// assert_eq!(runs, [1, 0, 2]); // case 0 once, case 2 twice, 7 none
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ConditionSetter<'a> {
    words: &'a mut [u32],
}

impl ConditionSetter<'_> {
    /// Sets the condition: non-zero holds; a switch runs case `value` (none when it is not
    /// below the number of cases).
    pub fn set(&mut self, value: u32) {
        self.words[0] = value;
    }

    /// The value set last (0 before any).
    pub fn get(&self) -> u32 {
        self.words[0]
    }
}

impl CpuParam for SetsCondition {
    type Value<'a> = ConditionSetter<'a>;

    fn from_arg(arg: CpuKernelArg<'_>) -> std::result::Result<ConditionSetter<'_>, String> {
        match arg {
            CpuKernelArg::SliceMut { bytes, .. } if bytes.len() >= 4 => {
                let words: &mut [u32] = bytemuck::try_cast_slice_mut(bytes).map_err(|e| {
                    format!("a condition handle's word cannot be viewed as `u32`: {e:?}")
                })?;
                Ok(ConditionSetter { words })
            }
            _ => Err(
                "expected a condition handle (`&ConditionHandle`) for a `SetsCondition` parameter"
                    .to_owned(),
            ),
        }
    }
}
