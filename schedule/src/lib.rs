//! The ordering analysis of `gpu_pipeline!`, in a crate of its own so that the macro (at
//! compile time) and the runtime (for pipelines whose stages, streams or ranges are only known
//! when the step is enqueued) compute the same thing with the same code.
//!
//! - [`schedule`] orders the stages of one step: every cross-stream pair that touches a
//!   common element of a buffer where either writes (or that `after` names) becomes a
//!   dependency; the transitive reduction of those, given stream order, becomes the waits;
//!   a minimal fork and join make the step a closed fork–join region on the origin stream.
//! - [`stage_edges`] gives the edges of a step built as a graph node by node: stream order
//!   and the waits, transitively reduced together.
//! - [`plan()`] turns a schedule into what an enqueue does, stage by stage: which events to
//!   wait on and which to record; [`plan_ahead`] adds the waits of a step that runs ahead of
//!   the one before it (only on the stages of that step it conflicts with).
//!
//! Plain data throughout, no I/O and no dependencies: the property tests of the macro crate
//! drive it with random stage sets.

mod built;
mod graph;
mod plan;

pub use built::stage_edges;
pub use graph::{
    Access, BufferId, Cycle, Edge, Extent, Hazard, Hop, Mode, Node, ORIGIN, Reason, Schedule,
    StageId, StreamId, Via, path, schedule,
};
pub use plan::{Plan, PlannedStage, plan, plan_ahead};
