//! What generated code stands on to build a step's graph straight from its stage graph, and
//! to run its `while` / `if` statements: node forms of the stage statements (copies, fills,
//! flag operations) for a graph or a conditional body, and the host-driven form of a device
//! condition that an eager step uses.

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::graph::{Comparison, ConditionValue, Graph, GraphBody, GraphNode, KernelNode};
use crate::launch::{KernelArgsFor, LaunchConfig, Signature, TypedKernel};
use crate::memory::{
    DeviceBuffer, DeviceDest, DeviceSource, DeviceView, DeviceViewMut, FlagCell, PinnedBuffer,
    PinnedDest, PinnedSource, PinnedView, PinnedViewMut,
};
use crate::stream::{MemOp, Stream, WaitCondition};

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::graph::Graph {}
    impl Sealed for crate::graph::GraphBody<'_> {}
}

/// Where generated code adds nodes: a [`Graph`] or a [`GraphBody`] (the node kinds both
/// hold), with whole buffers or views of them (`x[lo..hi]`) at either end. Not for use
/// outside generated code.
pub trait NodeSink: sealed::Sealed {
    /// [`Graph::add_copy_htod_node`].
    fn copy_htod<T: Pod>(
        &mut self,
        deps: &[GraphNode],
        src: &impl PinnedSource<T>,
        dst: &mut impl DeviceDest<T>,
    ) -> Result<GraphNode>;
    /// [`Graph::add_copy_dtoh_node`].
    fn copy_dtoh<T: Pod>(
        &mut self,
        deps: &[GraphNode],
        src: &impl DeviceSource<T>,
        dst: &mut impl PinnedDest<T>,
    ) -> Result<GraphNode>;
    /// [`Graph::add_copy_dtod_node`].
    fn copy_dtod<T: Pod>(
        &mut self,
        deps: &[GraphNode],
        src: &impl DeviceSource<T>,
        dst: &mut impl DeviceDest<T>,
    ) -> Result<GraphNode>;
    /// [`Graph::add_memset_u8_node`].
    fn memset_u8<T: Pod>(
        &mut self,
        deps: &[GraphNode],
        dst: &mut impl DeviceDest<T>,
        value: u8,
    ) -> Result<GraphNode>;
    /// [`Graph::add_memset_u32_node`].
    fn memset_u32<T: Pod>(
        &mut self,
        deps: &[GraphNode],
        dst: &mut impl DeviceDest<T>,
        value: u32,
    ) -> Result<GraphNode>;
    /// [`Graph::add_kernel_node`].
    fn kernel<Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
        &mut self,
        deps: &[GraphNode],
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<KernelNode>;
}

macro_rules! node_sink {
    ($ty:ty) => {
        impl NodeSink for $ty {
            fn copy_htod<T: Pod>(
                &mut self,
                deps: &[GraphNode],
                src: &impl PinnedSource<T>,
                dst: &mut impl DeviceDest<T>,
            ) -> Result<GraphNode> {
                self.add_copy_htod_node(deps, src, dst)
            }
            fn copy_dtoh<T: Pod>(
                &mut self,
                deps: &[GraphNode],
                src: &impl DeviceSource<T>,
                dst: &mut impl PinnedDest<T>,
            ) -> Result<GraphNode> {
                self.add_copy_dtoh_node(deps, src, dst)
            }
            fn copy_dtod<T: Pod>(
                &mut self,
                deps: &[GraphNode],
                src: &impl DeviceSource<T>,
                dst: &mut impl DeviceDest<T>,
            ) -> Result<GraphNode> {
                self.add_copy_dtod_node(deps, src, dst)
            }
            fn memset_u8<T: Pod>(
                &mut self,
                deps: &[GraphNode],
                dst: &mut impl DeviceDest<T>,
                value: u8,
            ) -> Result<GraphNode> {
                self.add_memset_u8_node(deps, dst, value)
            }
            fn memset_u32<T: Pod>(
                &mut self,
                deps: &[GraphNode],
                dst: &mut impl DeviceDest<T>,
                value: u32,
            ) -> Result<GraphNode> {
                self.add_memset_u32_node(deps, dst, value)
            }
            fn kernel<Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
                &mut self,
                deps: &[GraphNode],
                kernel: &TypedKernel<Sig>,
                config: LaunchConfig,
                args: A,
            ) -> Result<KernelNode> {
                self.add_kernel_node(deps, kernel, config, args)
            }
        }
    };
}

node_sink!(Graph);
node_sink!(GraphBody<'_>);

/// `launch k::f(..) grid .. block ..;` as a kernel node after `tail`, which then holds that
/// node alone; a top-level launch's node also goes to `nodes`, the list the setters update.
///
/// Out of line on purpose: a step of many launches runs one copy of this code (per kernel
/// signature) instead of one per statement, and the driver's call between two nodes leaves
/// less of the builder to fetch again. The 100-launch step of the `graph_build` bench
/// builds with 12 KB of code instead of 50 KB (docs/PERFORMANCE.md).
#[inline(never)]
pub fn launch_node<N: NodeSink, Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
    sink: &mut N,
    tail: &mut Vec<GraphNode>,
    nodes: Option<&mut Vec<KernelNode>>,
    kernel: &TypedKernel<Sig>,
    config: LaunchConfig,
    args: A,
) -> Result<()> {
    let node = sink.kernel(tail, kernel, config, args)?;
    tail.clear();
    tail.push(node.node());
    if let Some(nodes) = nodes {
        nodes.push(node);
    }
    Ok(())
}

/// A copy node from `Self` into `D`: the node form of
/// [`CopyInto`](crate::pipeline::ops::CopyInto).
#[diagnostic::on_unimplemented(
    message = "a pipeline cannot `copy` a `{Self}` into a `{D}`",
    note = "copies go device -> pinned, pinned -> device or device -> device, with the same \
            element type on both sides"
)]
pub trait CopyNode<D> {
    /// Adds the copy after `deps`.
    fn copy_node<S: NodeSink>(
        &self,
        sink: &mut S,
        deps: &[GraphNode],
        dst: &mut D,
    ) -> Result<GraphNode>;
}

/// Implements [`CopyNode`] for each pair of source and destination types through the sink's
/// `$add`: whole buffers and views (`x[lo..hi]`) alike.
macro_rules! copy_nodes {
    ($add:ident: $([$($lt:lifetime),*] $src:ty => $dst:ty;)*) => {$(
        impl<$($lt,)* T: Pod> CopyNode<$dst> for $src {
            fn copy_node<S: NodeSink>(
                &self,
                sink: &mut S,
                deps: &[GraphNode],
                dst: &mut $dst,
            ) -> Result<GraphNode> {
                sink.$add(deps, self, dst)
            }
        }
    )*};
}

copy_nodes! { copy_dtoh:
    [] DeviceBuffer<T> => PinnedBuffer<T>;
    ['s] DeviceView<'s, T> => PinnedBuffer<T>;
    ['s] DeviceViewMut<'s, T> => PinnedBuffer<T>;
    ['d] DeviceBuffer<T> => PinnedViewMut<'d, T>;
    ['s, 'd] DeviceView<'s, T> => PinnedViewMut<'d, T>;
    ['s, 'd] DeviceViewMut<'s, T> => PinnedViewMut<'d, T>;
}

copy_nodes! { copy_dtod:
    [] DeviceBuffer<T> => DeviceBuffer<T>;
    ['s] DeviceView<'s, T> => DeviceBuffer<T>;
    ['s] DeviceViewMut<'s, T> => DeviceBuffer<T>;
    ['d] DeviceBuffer<T> => DeviceViewMut<'d, T>;
    ['s, 'd] DeviceView<'s, T> => DeviceViewMut<'d, T>;
    ['s, 'd] DeviceViewMut<'s, T> => DeviceViewMut<'d, T>;
}

copy_nodes! { copy_htod:
    [] PinnedBuffer<T> => DeviceBuffer<T>;
    ['s] PinnedView<'s, T> => DeviceBuffer<T>;
    ['s] PinnedViewMut<'s, T> => DeviceBuffer<T>;
    ['d] PinnedBuffer<T> => DeviceViewMut<'d, T>;
    ['s, 'd] PinnedView<'s, T> => DeviceViewMut<'d, T>;
    ['s, 'd] PinnedViewMut<'s, T> => DeviceViewMut<'d, T>;
}

/// `copy src -> dst;` as a node.
pub fn copy_node<N: NodeSink, S: CopyNode<D> + ?Sized, D>(
    sink: &mut N,
    deps: &[GraphNode],
    src: &S,
    dst: &mut D,
) -> Result<GraphNode> {
    src.copy_node(sink, deps, dst)
}

/// A `fill` value, checked against its buffer's element type by [`fill_value`]: its bytes.
#[derive(Clone, Debug)]
pub struct FillValue(Box<[u8]>);

/// The value of `fill dst = value;`, typed as `dst`'s elements: where generated code reports a
/// value of the wrong type, once for the eager step and the built graph alike (the result
/// does not depend on the value's type, so the error says no more than the mismatch).
pub fn fill_value<T: Pod>(dst: &DeviceBuffer<T>, value: T) -> FillValue {
    let _ = dst;
    FillValue(bytemuck::bytes_of(&value).into())
}

/// The value of `fill x[lo..hi] = value;` (or of an element of a buffer array), typed as the
/// view's elements: [`fill_value`] for a view.
pub fn fill_view_value<T: Pod>(dst: &impl DeviceSource<T>, value: T) -> FillValue {
    let _ = dst;
    FillValue(bytemuck::bytes_of(&value).into())
}

impl FillValue {
    /// The value as a `T` (the type [`fill_value`] checked it against).
    fn get<T: Pod>(&self) -> Result<T> {
        bytemuck::try_pod_read_unaligned(&self.0).map_err(|_| {
            Error::invalid("fill", "the value does not have the buffer's element size")
        })
    }
}

/// `fill dst = value;` with a checked value.
pub fn fill_checked<T: Pod>(
    stream: &Stream,
    dst: &mut DeviceBuffer<T>,
    value: FillValue,
) -> Result<()> {
    crate::pipeline::ops::fill(stream, dst, value.get()?)
}

/// `fill x[lo..hi] = value;` with a checked value.
pub fn fill_view_checked<T: Pod>(
    stream: &Stream,
    dst: &mut impl DeviceDest<T>,
    value: FillValue,
) -> Result<()> {
    crate::pipeline::ops::fill_dest(stream, dst, value.get()?)
}

/// A flag value, checked against the flag's word by [`flag_value`]: its bits.
#[derive(Clone, Copy, Debug)]
pub struct FlagValue(u64);

/// The value of `write flag = value;` or `wait flag OP value;`, typed as the flag's word (see
/// [`fill_value`]).
pub fn flag_value<W: crate::memory::FlagWord>(flag: &FlagCell<W>, value: W) -> FlagValue {
    let _ = flag;
    FlagValue(value.widen())
}

/// `wait flag OP value;` with a checked value.
pub fn wait_flag_checked<W: crate::pipeline::ops::PipelineFlagWord>(
    stream: &Stream,
    flag: &FlagCell<W>,
    condition: WaitCondition,
    value: FlagValue,
) -> Result<()> {
    crate::pipeline::ops::wait_flag(stream, flag, condition, W::from_bits(value.0))
}

/// `write flag = value;` with a checked value.
pub fn write_flag_checked<W: crate::pipeline::ops::PipelineFlagWord>(
    stream: &Stream,
    flag: &FlagCell<W>,
    value: FlagValue,
) -> Result<()> {
    crate::pipeline::ops::write_flag(stream, flag, W::from_bits(value.0))
}

/// `fill dst = value;` as a node: the memset [`fill`](crate::pipeline::ops::fill) enqueues.
pub fn fill_node<N: NodeSink, T: Pod>(
    sink: &mut N,
    deps: &[GraphNode],
    dst: &mut impl DeviceDest<T>,
    value: FillValue,
) -> Result<GraphNode> {
    let value: T = value.get()?;
    if std::mem::size_of::<T>() == 4 {
        let bits = bytemuck::cast_slice::<T, u32>(std::slice::from_ref(&value))[0];
        return sink.memset_u32(deps, dst, bits);
    }
    let bytes = bytemuck::bytes_of(&value);
    match bytes.first() {
        Some(&first) if bytes.iter().all(|&b| b == first) => sink.memset_u8(deps, dst, first),
        _ => Err(Error::invalid(
            "fill",
            format!(
                "a {}-byte element whose bytes differ cannot be set with a memset; fill with a \
                 value whose bytes are all equal (such as zero), or launch a kernel",
                std::mem::size_of::<T>()
            ),
        )),
    }
}

/// The flag words a built graph can wait on and write (`u32` and `u64`).
pub trait FlagNode: crate::memory::FlagWord {
    /// `wait flag <cond> value;` as a memory-operation node.
    fn wait_op(flag: &FlagCell<Self>, condition: WaitCondition, value: Self) -> MemOp<'_>;
    /// `write flag = value;` as a memory-operation node.
    fn write_op(flag: &FlagCell<Self>, value: Self) -> MemOp<'_>;
}

impl FlagNode for u32 {
    fn wait_op(cell: &FlagCell<u32>, condition: WaitCondition, value: u32) -> MemOp<'_> {
        MemOp::WaitValue32 {
            cell,
            condition,
            value,
        }
    }
    fn write_op(cell: &FlagCell<u32>, value: u32) -> MemOp<'_> {
        MemOp::WriteValue32 { cell, value }
    }
}

impl FlagNode for u64 {
    fn wait_op(cell: &FlagCell<u64>, condition: WaitCondition, value: u64) -> MemOp<'_> {
        MemOp::WaitValue64 {
            cell,
            condition,
            value,
        }
    }
    fn write_op(cell: &FlagCell<u64>, value: u64) -> MemOp<'_> {
        MemOp::WriteValue64 { cell, value }
    }
}

/// `wait flag <cond> value;` as a node.
pub fn wait_flag_node<W: FlagNode>(
    graph: &mut Graph,
    deps: &[GraphNode],
    flag: &FlagCell<W>,
    condition: WaitCondition,
    value: FlagValue,
) -> Result<GraphNode> {
    graph.add_mem_op_node(deps, &[W::wait_op(flag, condition, W::from_bits(value.0))])
}

/// `write flag = value;` as a node.
pub fn write_flag_node<W: FlagNode>(
    graph: &mut Graph,
    deps: &[GraphNode],
    flag: &FlagCell<W>,
    value: FlagValue,
) -> Result<GraphNode> {
    graph.add_mem_op_node(deps, &[W::write_op(flag, W::from_bits(value.0))])
}

/// `host closure;` as a host node.
pub fn host_node<F: Fn() + Send + Sync + 'static>(
    graph: &mut Graph,
    deps: &[GraphNode],
    f: F,
) -> Result<GraphNode> {
    graph.add_host_node(deps, f)
}

/// A stage's nodes after one statement: `tail`, or an empty node after it when the statement
/// added no node (a `call` that enqueued nothing), so every stage ends in nodes of its own.
pub fn own_tail(
    graph: &mut Graph,
    before: &[GraphNode],
    tail: Vec<GraphNode>,
) -> Result<Vec<GraphNode>> {
    if tail.as_slice() == before && !before.is_empty() {
        Ok(vec![graph.add_empty_node(before)?])
    } else {
        Ok(tail)
    }
}

/// The pinned words an eager step copies device conditions into, one per value type,
/// allocated on first use.
#[derive(Debug, Default)]
pub struct ConditionStaging {
    f32: Option<PinnedBuffer<f32>>,
    f64: Option<PinnedBuffer<f64>>,
    u32: Option<PinnedBuffer<u32>>,
}

/// The value types an eager step reads conditions of; see [`ConditionValue`].
pub trait StagedValue: ConditionValue + PartialOrd {
    /// This type's staging word.
    fn slot(staging: &mut ConditionStaging) -> &mut Option<PinnedBuffer<Self>>;
}

impl StagedValue for f32 {
    fn slot(staging: &mut ConditionStaging) -> &mut Option<PinnedBuffer<f32>> {
        &mut staging.f32
    }
}

impl StagedValue for f64 {
    fn slot(staging: &mut ConditionStaging) -> &mut Option<PinnedBuffer<f64>> {
        &mut staging.f64
    }
}

impl StagedValue for u32 {
    fn slot(staging: &mut ConditionStaging) -> &mut Option<PinnedBuffer<u32>> {
        &mut staging.u32
    }
}

/// A device condition decided on the host, as an eager step does it: copies the first element
/// of `value` back in `stream`'s order, waits for it, and compares. (A built graph decides on
/// the device instead, without the round trip.)
pub fn host_condition<T: StagedValue>(
    staging: &mut ConditionStaging,
    stream: &Stream,
    value: &DeviceBuffer<T>,
    comparison: Comparison,
    threshold: T,
) -> Result<bool> {
    let slot = T::slot(staging);
    if slot.is_none() {
        *slot = Some(PinnedBuffer::zeros(stream.context(), 1)?);
    }
    let word = slot
        .as_mut()
        .ok_or_else(|| Error::invalid("while", "the staging word is missing"))?;
    stream.copy_dtoh(&value.slice(0..1)?, word)?;
    let read = word.as_slice()?[0];
    Ok(comparison.holds(read, threshold))
}

/// A switch's value decided on the host, as an eager step does it: the first element of
/// `value`, copied back in `stream`'s order and waited for.
pub fn host_value(
    staging: &mut ConditionStaging,
    stream: &Stream,
    value: &DeviceBuffer<u32>,
) -> Result<u32> {
    let slot = u32::slot(staging);
    if slot.is_none() {
        *slot = Some(PinnedBuffer::zeros(stream.context(), 1)?);
    }
    let word = slot
        .as_mut()
        .ok_or_else(|| Error::invalid("switch", "the staging word is missing"))?;
    stream.copy_dtoh(&value.slice(0..1)?, word)?;
    Ok(word.as_slice()?[0])
}

/// `step % modulus == remainder` for an eager step; a zero modulus, or a remainder that is
/// not below it (a test that never holds), is an error, as it is for a built graph
/// ([`Condition::every`](crate::Condition::every)) and, when both are constants, when the
/// program compiles.
pub fn step_selects(step: u32, modulus: u32, remainder: u32) -> Result<bool> {
    if modulus == 0 {
        return Err(Error::invalid("if step % k == r", "`k` must be at least 1"));
    }
    if remainder >= modulus {
        return Err(Error::invalid(
            "if step % k == r",
            format!("`step % {modulus} == {remainder}` never holds: `r` must be below `k`"),
        ));
    }
    Ok(step % modulus == remainder)
}

/// The `max` of the loop written `written` (`while residual > tol`), which must be at least
/// 1, eagerly as for a built graph's loop.
pub fn loop_maximum(written: &str, max: u32) -> Result<u32> {
    if max == 0 {
        return Err(Error::invalid(
            "a loop's `max`",
            format!(
                "`{written} max 0` can run no iteration: a loop needs a maximum of at least 1 \
                 (write the largest iteration count the loop may need)"
            ),
        ));
    }
    Ok(max)
}

/// The error of a loop that stopped at its maximum with its condition still holding.
pub fn iteration_limit(label: &str, max_iterations: u32) -> Error {
    Error::IterationLimit {
        label: label.to_owned(),
        max_iterations,
    }
}

/// A condition's buffer, tested by `test` (as written): the test reads its first element, so
/// it needs one. Checked before a step enqueues or builds anything.
pub fn condition_buffer<T: Pod>(test: &str, value: &DeviceBuffer<T>) -> Result<()> {
    if !value.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(
        "pipeline step",
        format!(
            "the test `{test}` reads the first element of its buffer, which is empty; give it \
             a buffer of at least one element"
        ),
    ))
}

/// A loop swap, `swap` (as written) in a loop body: the body runs with `a` and `b`
/// exchanged every other iteration, and after an odd count `b` is copied into `a`, so both
/// must hold one length. Checked before a step enqueues or builds anything.
pub fn swap_lengths<T: Pod>(
    swap: &'static str,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
) -> Result<()> {
    if a.len() == b.len() {
        return Ok(());
    }
    Err(Error::invalid(
        "pipeline step",
        format!(
            "`{swap}` in a loop body exchanges buffers of {} and {} elements; a loop swap needs \
             buffers of one length (the loop runs its body on both, and after an odd number of \
             iterations copies the second into the first)",
            a.len(),
            b.len()
        ),
    ))
}

#[cfg(test)]
mod step_tests {
    use super::step_selects;

    #[test]
    fn a_step_test_that_cannot_hold_is_an_error() {
        assert!(step_selects(6, 3, 0).unwrap());
        assert!(!step_selects(7, 3, 0).unwrap());
        assert!(step_selects(7, 0, 0).is_err());
        let never = step_selects(7, 4, 4).unwrap_err().to_string();
        assert!(never.contains("never holds"), "{never}");
    }
}
