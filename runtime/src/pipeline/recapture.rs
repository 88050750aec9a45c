//! A captured step built again from new params: the executable graph takes the new build's
//! parameters in place (`cuGraphExecUpdate`) when the topology allows, and is instantiated
//! anew only when it does not; and a captured step cloned (`cuGraphClone`) into a second
//! executable graph. What generated graph structs call for `recapture`, `recapture_with`,
//! `clone_step` and the builds that setters and swaps need.

use std::sync::Arc;

use super::plan::{Captured, StepPlan};
use crate::error::Result;
use crate::graph::{Graph, GraphUpdateResult, KernelNode};

/// What a captured graph's `recapture` (see [`gpu_pipeline!`](crate::gpu_pipeline)) did to its
/// executable graphs: updated them in place, or instantiated anew.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Recaptured, Stream, gpu_pipeline};
///
/// gpu_pipeline! {
///     /// Copies `src` to the host at every replay.
///     pub pipeline Echo {
///         streams { main }
///         params { src: &mut DeviceBuffer<f32>, spare: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
///         stage echo on main { copy src -> out; fill spare = 0.0; }
///     }
/// }
///
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut a = DeviceBuffer::from_slice(&stream, &[1.0f32; 4])?;
/// let mut b = DeviceBuffer::from_slice(&stream, &[2.0f32; 4])?;
/// let mut out = PinnedBuffer::<f32>::zeros(&ctx, 4)?;
/// let mut echo = Echo::new(&ctx)?;
/// let mut graph = echo.capture(EchoParams { src: &mut a, spare: &mut b, out: &mut out })?;
/// graph.launch()?;
/// // The same step with the two buffers exchanged: the executable graph is updated in place.
/// let outcome = graph.recapture_with(|p| std::mem::swap(&mut p.src, &mut p.spare))?;
/// assert_eq!(outcome, Recaptured::Updated);
/// graph.launch()?;
/// assert_eq!(&*graph.window()?.out()?, &[0.0; 4]);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "says whether the step was updated in place or instantiated anew"]
pub enum Recaptured {
    /// Every executable graph took the new build's parameters in place (`cuGraphExecUpdate`):
    /// nothing was instantiated, as a re-capture with an unchanged topology should be.
    Updated,
    /// At least one executable graph was instantiated anew.
    Instantiated {
        /// The driver's verdict on the first refused update (the topology changed, a kernel
        /// node launches another function, ...); `None` when there was no executable graph to
        /// update (an earlier build had failed).
        refused: Option<GraphUpdateResult>,
    },
}

impl Recaptured {
    /// Whether every executable graph was updated in place.
    pub fn is_updated(&self) -> bool {
        *self == Recaptured::Updated
    }

    /// The outcome of two updates together: `Updated` when both were, otherwise the first
    /// instantiation's.
    pub fn and(self, other: Recaptured) -> Recaptured {
        match self {
            Recaptured::Updated => other,
            instantiated => instantiated,
        }
    }
}

/// One kind of step built as a graph and not yet instantiated: what `commit` turns into an
/// executable graph, by update or instantiation.
#[derive(Debug)]
pub struct Built {
    /// The graph.
    pub graph: Graph,
    /// Its top-level kernel nodes, in launch order.
    pub nodes: Vec<KernelNode>,
    /// The plan it was built from.
    pub plan: Arc<StepPlan>,
    /// The pipeline's scratch allocation count when it was built: which scratch buffers its
    /// nodes use.
    pub scratch_epoch: u64,
}

/// Instantiates a build.
pub fn instantiate(built: Built) -> Result<Captured> {
    let exec = built.graph.instantiate()?;
    Ok(Captured {
        exec,
        nodes: built.nodes,
        plan: built.plan,
        graph: built.graph,
        updated_from: None,
        retired: None,
        outdated: false,
        scratch_epoch: built.scratch_epoch,
    })
}

/// Puts `built` into `slot`: by a whole update of the executable graph there when the driver
/// accepts it (the executable graph keeps its node handles, of the graph it was instantiated
/// from), by instantiating `built` otherwise. On an error `slot` is left empty (an executable
/// graph whose update was refused may hold parameters of neither build).
pub fn commit(slot: &mut Option<Captured>, built: Built) -> Result<Recaptured> {
    let Some(mut captured) = slot.take() else {
        *slot = Some(instantiate(built)?);
        return Ok(Recaptured::Instantiated { refused: None });
    };
    let verdict = captured.exec.try_update(&built.graph)?;
    if verdict.is_success() {
        captured.plan = built.plan;
        captured.scratch_epoch = built.scratch_epoch;
        // The build this one replaces goes after the next launch is enqueued (`launched`).
        captured.retired = captured.updated_from.replace((built.graph, built.nodes));
        captured.outdated = false;
        *slot = Some(captured);
        return Ok(Recaptured::Updated);
    }
    // Dropped first: a graph with conditional nodes has one executable graph at a time.
    drop(captured);
    *slot = Some(instantiate(built)?);
    Ok(Recaptured::Instantiated {
        refused: Some(verdict.result),
    })
}

/// A second executable graph of `captured`'s step: its latest build cloned (`cuGraphClone`)
/// and instantiated, with the clone's kernel nodes. `None` where the graph cannot be cloned
/// (it has conditional nodes, a CUDA rule): build the step again instead. The clone has the
/// parameters of that build; in-place setters applied since must be applied to it again.
pub fn clone_captured(captured: &Captured) -> Result<Option<Captured>> {
    let (graph, nodes) = match &captured.updated_from {
        Some((graph, nodes)) => (graph, nodes),
        None => (&captured.graph, &captured.nodes),
    };
    if graph.has_conditional_nodes() {
        return Ok(None);
    }
    let (clone, nodes) = graph.try_clone_with_nodes(nodes)?;
    let exec = clone.instantiate()?;
    Ok(Some(Captured {
        exec,
        nodes,
        plan: captured.plan.clone(),
        graph: clone,
        updated_from: None,
        retired: None,
        outdated: false,
        scratch_epoch: captured.scratch_epoch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instantiation_wins_over_updates_and_the_first_reason_is_kept() {
        let topology = Recaptured::Instantiated {
            refused: Some(GraphUpdateResult::ERROR_TOPOLOGY_CHANGED),
        };
        let function = Recaptured::Instantiated {
            refused: Some(GraphUpdateResult::ERROR_FUNCTION_CHANGED),
        };
        assert_eq!(
            Recaptured::Updated.and(Recaptured::Updated),
            Recaptured::Updated
        );
        assert_eq!(Recaptured::Updated.and(topology), topology);
        assert_eq!(topology.and(Recaptured::Updated), topology);
        assert_eq!(topology.and(function), topology);
        assert!(Recaptured::Updated.is_updated());
        assert!(!function.is_updated());
    }
}
