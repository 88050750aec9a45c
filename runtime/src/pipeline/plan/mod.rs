//! The plan of a step, as generated pipelines enqueue it: which stage instances run, on which
//! stream, on which elements of which buffers, and the events between them.
//!
//! A pipeline's generated code *describes* each kind of step ([`Describe`]): every stage
//! instance in program order (a stage once, a stage inside `for i in 0..N` once per `i`), the
//! stream it runs on (an element of a stream array for `on work[i % s]`), and every buffer
//! reference of its statements, resolved to an element of a buffer array and a range of
//! elements (`x[lo..hi]`). The description is checked before anything is enqueued (stream
//! indices, array indices and ranges in bounds; `concurrent` claims hold) and scheduled with
//! the same analysis the macro runs at compile time (`gpu-pipeline-schedule`): stages that touch
//! disjoint ranges of one buffer run concurrently, overlapping ranges are ordered. The result
//! is a [`StepPlan`], cached by the pipeline and rebuilt only when the description changes.
//!
//! The statements of each stage then use the resolved references ([`Ref`]) the plan holds,
//! never a second evaluation of the user's expressions: what runs is what was analysed.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use gpu_pipeline_schedule::{
    self as schedule, Access, BufferId, Edge, Extent, Mode, Node, Plan, Reason, StageId, StreamId,
};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::event::{Event, EventFlags};
use crate::pipeline::StreamPriority;
use crate::stream::Stream;

mod coverage;
mod describe;

pub use describe::{BodiesRun, Claim, Describe, Description, Instance, ReadKind, Ref};

/// What a step's statements need from its plan: each stage instance with its stream and
/// resolved references, in program order, plus the schedule of a closed step and of a step
/// that runs ahead of the one before it.
#[derive(Debug)]
pub struct StepPlan {
    /// The description it was made from.
    pub description: Description,
    /// The stage instances, in program order (indexed by the plans' `StageId`s).
    pub instances: Vec<Instance>,
    /// A closed step: fork, stages, join.
    pub closed: Plan,
    /// A step that runs ahead of the one before it.
    pub ahead: Plan,
    /// Stream slots the step uses.
    pub streams: usize,
    /// Where each stage marks its progress: name, stream slot, 1-based position (the closed
    /// plan's enqueue order).
    pub sites: Vec<super::StageSite>,
    /// For each stage instance, the instances whose nodes its nodes follow when the step is
    /// built as a graph node by node: stream order and the waits of the closed plan,
    /// transitively reduced together (`gpu_pipeline_schedule::stage_edges`), so the graph has
    /// no edge the data does not need.
    pub graph_before: Vec<Vec<usize>>,
    /// For each event slot of the closed plan, the stream declaration of the instance that
    /// records it (a pipeline over several devices keeps each event on its recorder's device).
    closed_recorders: Vec<usize>,
    /// The same for a step that runs ahead.
    ahead_recorders: Vec<usize>,
    /// For each event slot, the (declaration, lane) of the stream whose stage records it: a
    /// closed step's, then a step's that runs ahead.
    recorder_lanes: [Vec<(usize, usize)>; 2],
    edges: Vec<Edge>,
}

impl StepPlan {
    /// Schedules `description` and checks `claims`: no two stage instances a claim names (of
    /// one iteration, for a claim inside a `for`) may be ordered.
    pub fn new(description: Description, claims: &[Claim]) -> Result<StepPlan> {
        let pipeline = description.pipeline;
        let error = |message: String| {
            Error::invalid("pipeline step", format!("pipeline `{pipeline}`: {message}"))
        };
        let stages = &description.stages;
        // `after`: resolved to instances now that every instance is known.
        let mut by_template: HashMap<usize, Vec<usize>> = HashMap::new();
        for (id, stage) in stages.iter().enumerate() {
            by_template.entry(stage.template).or_default().push(id);
        }
        let nodes: Vec<Node> = stages
            .iter()
            .map(|stage| {
                let mut after = Vec::new();
                for &(template, same_iteration) in &stage.after {
                    for &other in by_template.get(&template).into_iter().flatten() {
                        if !same_iteration || stages[other].index == stage.index {
                            after.push(StageId(other));
                        }
                    }
                }
                after.sort();
                after.dedup();
                Node {
                    stream: StreamId(stage.stream),
                    accesses: stage.accesses.clone(),
                    after,
                }
            })
            .collect();
        let one = schedule::schedule(description.streams, &nodes).map_err(|cycles| {
            let cycle = &cycles[0];
            error(format!(
                "stage `{}` is declared after a stage that already runs after it",
                stages[cycle.stage.0].label()
            ))
        })?;
        for claim in claims {
            for (a, first) in stages.iter().enumerate() {
                for (b, second) in stages.iter().enumerate() {
                    if a == b
                        || first.template == second.template
                        || !claim.stages.contains(&first.template)
                        || !claim.stages.contains(&second.template)
                        || (claim.per_iteration && first.index != second.index)
                    {
                        continue;
                    }
                    if schedule::path(
                        &nodes.iter().map(|n| n.stream).collect::<Vec<_>>(),
                        &one.dependencies,
                        StageId(a),
                        StageId(b),
                    )
                    .is_some()
                    {
                        return Err(error(format!(
                            "`concurrent({})` does not hold: `{}` runs after `{}` (they touch a \
                             common element of a buffer, one writing, or are on one stream)",
                            claim_names(claim, stages),
                            second.label(),
                            first.label()
                        )));
                    }
                }
            }
        }
        let closed = schedule::plan(&nodes, &one);
        coverage::scratch_written_first(pipeline, stages, &description.scratch, &closed)?;
        let ahead = schedule::plan_ahead(description.streams, &nodes, &one);
        let streams: Vec<StreamId> = nodes.iter().map(|n| n.stream).collect();
        let order: Vec<StageId> = closed.stages.iter().map(|p| p.stage).collect();
        let mut graph_before = vec![Vec::new(); stages.len()];
        for (from, to) in schedule::stage_edges(&streams, &order, &one.edges) {
            graph_before[to.0].push(from.0);
        }
        let recorders = |plan: &Plan| {
            let mut decls = vec![0; plan.events];
            for planned in &plan.stages {
                if let (Some(slot), Some(stage)) = (planned.record, stages.get(planned.stage.0)) {
                    decls[slot] = stage.decl;
                }
            }
            decls
        };
        let (closed_recorders, ahead_recorders) = (recorders(&closed), recorders(&ahead));
        let lanes = |plan: &Plan| {
            let mut lanes = vec![(0, 0); plan.events];
            for planned in &plan.stages {
                if let (Some(slot), Some(stage)) = (planned.record, stages.get(planned.stage.0)) {
                    lanes[slot] = (stage.decl, stage.lane);
                }
            }
            lanes
        };
        let recorder_lanes = [lanes(&closed), lanes(&ahead)];
        let sites = closed
            .stages
            .iter()
            .enumerate()
            .map(|(position, planned)| {
                let stage = &stages[planned.stage.0];
                (stage.name, stage.stream, position as u32 + 1)
            })
            .collect();
        Ok(StepPlan {
            instances: stages.clone(),
            streams: description.streams,
            description,
            closed,
            ahead,
            sites,
            graph_before,
            closed_recorders,
            ahead_recorders,
            recorder_lanes,
            edges: one.edges,
        })
    }

    /// The edges between stage instances of the step built as a graph (see
    /// [`StepPlan::graph_before`]).
    pub fn graph_edges(&self) -> usize {
        self.graph_before.iter().map(Vec::len).sum()
    }

    /// For each event slot of the schedule `mode` enqueues, the stream declaration whose
    /// stage records it.
    pub fn recorders(&self, mode: StepMode) -> &[usize] {
        match mode {
            StepMode::Closed => &self.closed_recorders,
            StepMode::Ahead { .. } => &self.ahead_recorders,
        }
    }

    /// For each event slot of the schedule `mode` enqueues, the stream (declaration, lane)
    /// whose stage records it: where a pipeline over a device array puts the event.
    pub fn recorder_lanes(&self, mode: StepMode) -> &[(usize, usize)] {
        match mode {
            StepMode::Closed => &self.recorder_lanes[0],
            StepMode::Ahead { .. } => &self.recorder_lanes[1],
        }
    }

    /// Event slots a step of either kind uses.
    pub fn events(&self) -> usize {
        self.closed.events.max(self.ahead.events)
    }

    /// The step in Graphviz DOT: one cluster per stream, stage instances as boxes in stream
    /// order (dotted), one solid edge per wait with its reasons; `streams` names each stream
    /// declaration and `buffers` each buffer.
    pub fn dot(&self, streams: &[&str], buffers: &[&str]) -> String {
        let mut out = String::new();
        // `fmt::Write` for `String` never fails.
        let _ = self.write_dot(&mut out, streams, buffers);
        out
    }

    fn write_dot(&self, out: &mut String, streams: &[&str], buffers: &[&str]) -> std::fmt::Result {
        let name = self.description.pipeline;
        let label = |id: StageId| format!("\"{}\"", self.instances[id.0].label());
        writeln!(out, "digraph {name} {{")?;
        writeln!(out, "    node [shape=box];")?;
        let mut slots: Vec<(usize, usize, usize)> = self
            .instances
            .iter()
            .map(|i| (i.stream, i.decl, i.lane))
            .chain([(0, 0, 0)])
            .collect();
        slots.sort();
        slots.dedup();
        for (slot, decl, lane) in slots {
            let stream = streams.get(decl).copied().unwrap_or("?");
            let title = if self.instances.iter().any(|i| i.decl == decl && i.lane > 0) {
                format!("{stream}[{lane}]")
            } else {
                stream.to_owned()
            };
            writeln!(out, "    subgraph cluster_{slot} {{")?;
            writeln!(out, "        label = \"{title}\";")?;
            let mut chain: Vec<String> = self
                .closed
                .stages
                .iter()
                .filter(|p| self.instances[p.stage.0].stream == slot)
                .map(|p| label(p.stage))
                .collect();
            for node in &chain {
                writeln!(out, "        {node};")?;
            }
            // The origin starts and ends the step.
            if slot == 0 {
                writeln!(out, "        \"(start)\" [shape=circle];")?;
                writeln!(out, "        \"(end)\" [shape=doublecircle];")?;
                chain.insert(0, "\"(start)\"".to_owned());
                chain.push("\"(end)\"".to_owned());
            }
            if chain.len() > 1 {
                writeln!(out, "        {} [style=dotted];", chain.join(" -> "))?;
            }
            writeln!(out, "    }}")?;
        }
        for edge in &self.edges {
            let reasons: Vec<String> = edge
                .reasons
                .iter()
                .map(|reason| match reason {
                    Reason::Hazard { buffer, hazard } => {
                        let index = buffer.0 >> 32;
                        let buffer = buffers.get(index).copied().unwrap_or("?");
                        format!("{} {buffer}", hazard.abbreviation())
                    }
                    Reason::After => "after".to_owned(),
                })
                .collect();
            writeln!(
                out,
                "    {} -> {} [label=\"{}\"];",
                label(edge.from),
                label(edge.to),
                reasons.join(", ")
            )?;
        }
        for planned in self.closed.stages.iter().filter(|p| p.fork) {
            writeln!(
                out,
                "    \"(start)\" -> {} [label=\"fork\"];",
                label(planned.stage)
            )?;
        }
        for &slot in &self.closed.join {
            if let Some(planned) = self.closed.stages.iter().find(|p| p.record == Some(slot)) {
                writeln!(
                    out,
                    "    {} -> \"(end)\" [label=\"join\"];",
                    label(planned.stage)
                )?;
            }
        }
        writeln!(out, "}}")
    }
}

fn claim_names(claim: &Claim, stages: &[Instance]) -> String {
    let names: Vec<&str> = claim
        .stages
        .iter()
        .filter_map(|&t| stages.iter().find(|s| s.template == t).map(|s| s.name))
        .collect();
    names.join(", ")
}

/// A label that lives as long as the program, for profiles (`load[3]` on `work[1]`): each
/// distinct label is kept once, so a pipeline's labels cost their text, once.
pub fn intern(label: String) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, PoisonError};
    static LABELS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut labels = LABELS.lock().unwrap_or_else(PoisonError::into_inner);
    let labels = labels.get_or_insert_with(HashSet::new);
    if let Some(&known) = labels.get(label.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(label.into_boxed_str());
    labels.insert(leaked);
    leaked
}

/// The stage and stream names of a profiled step, in the closed plan's enqueue order:
/// `load[3]` on `work[1]` (interned: each distinct label is kept once); `streams` names each
/// declaration.
pub fn profile_sites(
    plan: &StepPlan,
    streams: &[&'static str],
) -> Vec<(&'static str, &'static str)> {
    plan.closed
        .stages
        .iter()
        .filter_map(|planned| {
            let instance = plan.instances.get(planned.stage.0)?;
            let stream = streams.get(instance.decl).copied().unwrap_or("?");
            let array = plan
                .instances
                .iter()
                .any(|i| i.decl == instance.decl && i.lane > 0);
            let stage = match instance.index {
                Some(_) => intern(instance.label()),
                None => instance.name,
            };
            let stream = if array {
                intern(format!("{stream}[{}]", instance.lane))
            } else {
                stream
            };
            Some((stage, stream))
        })
        .collect()
}

/// The cached plan of one kind of step: rebuilt when the description changes.
pub fn plan_for(
    cache: &mut Option<Arc<StepPlan>>,
    description: Description,
    claims: &[Claim],
) -> Result<Arc<StepPlan>> {
    if let Some(plan) = cache
        && plan.description == description
    {
        return Ok(plan.clone());
    }
    let plan = Arc::new(StepPlan::new(description, claims)?);
    *cache = Some(plan.clone());
    Ok(plan)
}

/// One kind of step captured as a graph: what a generated graph struct keeps per kind of step
/// and arrangement of swapped buffers, with the plan it was captured from (whose stage order
/// gives each launch statement its kernel node).
#[derive(Debug)]
pub struct Captured {
    /// The executable graph.
    pub exec: crate::graph::GraphExec,
    /// Its kernel nodes, in launch order: nodes of `graph`, which the executable graph's
    /// in-place updates name.
    pub nodes: Vec<crate::graph::KernelNode>,
    /// The plan it was built from (the latest, after a whole update).
    pub plan: Arc<StepPlan>,
    /// The graph it was instantiated from (the executable graph's node handles refer to it).
    pub graph: crate::graph::Graph,
    /// The build whose parameters a whole update (`cuGraphExecUpdate`) gave the executable
    /// graph last, with its kernel nodes; `None` while `graph` is that build. What a clone
    /// copies.
    pub updated_from: Option<(crate::graph::Graph, Vec<crate::graph::KernelNode>)>,
    /// The build a whole update replaced as `updated_from`, dropped once the next launch is
    /// enqueued ([`Captured::launched`]): destroying a graph costs the host some
    /// microseconds, which the replay's time on the GPU then hides (jacobiCudaGraphs'
    /// method 1 updates before every launch). Nothing uses it: the executable graph holds
    /// the parameters the update copied, and the launches before the update have finished
    /// (a recapture waits for them).
    pub retired: Option<(crate::graph::Graph, Vec<crate::graph::KernelNode>)>,
    /// Built from params that changed since (a recapture of another arrangement): never
    /// launched, only updated from a new build first.
    pub outdated: bool,
    /// The pipeline's scratch allocation count when it was built: while the pipeline's
    /// count differs (a clone resized them), it is built again before its next launch.
    pub scratch_epoch: u64,
}

impl Captured {
    /// After a launch was enqueued: drops the build the last whole update replaced.
    #[inline]
    pub fn launched(&mut self) {
        self.retired = None;
    }

    /// Whether it may be launched (and updated in place) as it is: not outdated, and built
    /// with the scratch buffers of the pipeline's allocation count `scratch_epoch`.
    #[inline]
    pub fn ready(&self, scratch_epoch: u64) -> bool {
        !self.outdated && self.scratch_epoch == scratch_epoch
    }
}

/// Drops a generated graph's builds, after the graph waited for every launch it made or
/// lent: the context is synchronized once (a `Quiesced` scope, `cuda/quiesced.rs`), so that
/// what only the builds use (their executable graphs, condition words, loop counters and
/// states) is freed with no wait each. Where that synchronize fails, each waits for itself
/// (and is leaked when it cannot), as any drop does.
pub fn drop_captured(builds: Vec<Option<Captured>>) {
    let ctx = builds
        .iter()
        .flatten()
        .find_map(|c| c.exec.cuda_context())
        .cloned();
    let _scope = ctx
        .as_ref()
        .and_then(|c| Some((c, crate::cuda::quiesced::Quiesced::enter(c).ok()?)));
    if let Some((ctx, _)) = &_scope {
        // Held here by value, so launched by nobody after that synchronize. Only these:
        // the drops below may run user code (what host closures capture), which may launch
        // and drop executable graphs of its own, and those must still wait for themselves.
        for build in builds.iter().flatten() {
            build.exec.idle_after_synchronize(ctx);
        }
    }
    drop(builds);
}

/// What a pipeline with device control flow holds so that the library's condition kernels
/// stay loaded between its captures (see `cuda::keep_condition_module`): nothing on the CPU
/// backend, or where the driver has no conditional nodes.
pub struct ConditionKernels(
    #[allow(dead_code, reason = "held for its drop")] Option<Arc<crate::cuda::Module>>,
);

impl ConditionKernels {
    /// Loads (or finds loaded) the condition kernels of `ctx`.
    pub fn keep(ctx: &crate::context::Context) -> ConditionKernels {
        ConditionKernels(match ctx.kind() {
            crate::context::ContextBackend::Cuda(c) => crate::cuda::keep_condition_module(c),
            crate::context::ContextBackend::Cpu(_) => None,
        })
    }
}

impl std::fmt::Debug for ConditionKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ConditionKernels")
            .field(&self.0.is_some())
            .finish()
    }
}

/// The error of generated code that found the plan and its statements disagreeing (a bug).
pub fn internal(pipeline: &'static str, what: &str) -> Error {
    Error::invalid(
        "pipeline step",
        format!(
            "pipeline `{pipeline}`: internal error in gpu_pipeline!: {what}; please report this bug"
        ),
    )
}

/// How one enqueue of a step relates to the steps around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepMode {
    /// A closed step: forks from the origin at its start and joins it at its end, so it runs
    /// after everything enqueued on the origin before and before everything after.
    Closed,
    /// One of consecutive steps that run ahead of each other: the first forks, the last
    /// joins, and each stage waits only for the stages of the step before that it conflicts
    /// with.
    Ahead {
        /// The first of the run (forks, waits on nothing of a step before).
        first: bool,
        /// The last of the run (joins).
        last: bool,
        /// Which of the two event sets the step records into.
        parity: bool,
    },
}

impl StepMode {
    /// The schedule this step enqueues.
    pub fn schedule(self, plan: &StepPlan) -> &Plan {
        match self {
            StepMode::Closed => &plan.closed,
            StepMode::Ahead { .. } => &plan.ahead,
        }
    }

    /// Whether the step forks from the origin (and resets the progress marks).
    pub fn forks(self) -> bool {
        match self {
            StepMode::Closed => true,
            StepMode::Ahead { first, .. } => first,
        }
    }

    /// Whether the origin joins the other streams at the end of the step.
    pub fn joins(self) -> bool {
        match self {
            StepMode::Closed => true,
            StepMode::Ahead { last, .. } => last,
        }
    }

    /// Whether stages wait on the events of the step before.
    pub fn waits_on_previous(self) -> bool {
        matches!(self, StepMode::Ahead { first: false, .. })
    }

    /// The first event slot of this step's set and of the previous step's, for a plan of
    /// `events` slots per step.
    pub fn event_sets(self, events: usize) -> (usize, usize) {
        match self {
            StepMode::Closed => (0, 0),
            StepMode::Ahead { parity, .. } => {
                if parity {
                    (events, 0)
                } else {
                    (0, events)
                }
            }
        }
    }
}

/// One stream declaration of a pipeline: its priority, whether it is non-blocking, and its
/// name.
#[derive(Clone, Copy, Debug)]
pub struct StreamDecl {
    /// The declared priority.
    pub priority: StreamPriority,
    /// Declared `non_blocking`.
    pub non_blocking: bool,
    /// `Pipeline.stream`: what the CPU backend's race reports call its streams.
    pub name: &'static str,
    /// Whether it is a stream array, whose lanes are named `name[i]`.
    pub array: bool,
}

/// Makes `lanes` hold at least `count` streams of `decl`.
pub fn ensure_streams(
    ctx: &Context,
    lanes: &mut Vec<Stream>,
    decl: StreamDecl,
    count: usize,
) -> Result<()> {
    while lanes.len() < count {
        let name = match decl.array {
            true => format!("{}[{}]", decl.name, lanes.len()),
            false => decl.name.to_owned(),
        };
        lanes.push(decl.priority.new_stream(ctx, decl.non_blocking, name)?);
    }
    Ok(())
}

/// Makes `events` hold at least `count` ordering events.
pub fn ensure_events(ctx: &Context, events: &mut Vec<Event>, count: usize) -> Result<()> {
    while events.len() < count {
        events.push(Event::with_flags(ctx, EventFlags::ORDERING)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two chunks of one buffer on two streams, then a stage on the origin reading both.
    fn chunks(split: usize) -> Description {
        let mut d = Describe::new("P", &[("s", "", 1), ("lane", "2", 2)]).unwrap();
        for i in 0..2 {
            d.stage(0, "load", Some(i), 1, "work", i).unwrap();
            let (start, end) = if i == 0 { (0, split) } else { (split, 8) };
            d.touch(0, "x", None, Some(start), Some(end), 8, true)
                .unwrap();
        }
        d.stage(1, "sum", None, 0, "main", 0).unwrap();
        d.touch(0, "x", None, None, None, 8, false).unwrap();
        d.finish()
    }

    /// Two chunks of scratch buffer `x` written on two streams (elements `0..split` and
    /// `split..upto`), then read whole on the origin, as `kind` reads.
    fn scratch_chunks(split: usize, upto: usize, kind: ReadKind) -> Result<StepPlan> {
        let mut d = Describe::new("P", &[("s", "", 1), ("lane", "2", 2)]).unwrap();
        d.scratch(0, "x", 8, "0.0");
        for i in 0..2 {
            d.stage(0, "load", Some(i), 1, "work", i).unwrap();
            let (start, end) = if i == 0 { (0, split) } else { (split, upto) };
            d.touch(0, "x", None, Some(start), Some(end), 8, true)
                .unwrap();
        }
        d.stage(1, "sum", None, 0, "main", 0).unwrap();
        d.read_kind(kind);
        d.touch(0, "x", None, None, None, 8, false).unwrap();
        StepPlan::new(d.finish(), &[])
    }

    #[test]
    fn a_scratch_read_needs_the_elements_it_surely_reads_written_before_it() {
        scratch_chunks(3, 8, ReadKind::Every).unwrap();
        let err = scratch_chunks(3, 6, ReadKind::Every)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("stage `sum` reads elements 6..8 of scratch buffer `x`")
                && err.contains("`fill x = 0.0;`"),
            "{err}"
        );
        // A kernel's window may be read in part: refused only when nothing of it is written.
        scratch_chunks(3, 6, ReadKind::Within).unwrap();
        scratch_chunks(0, 0, ReadKind::First).unwrap_err();
        let err = scratch_chunks(0, 0, ReadKind::Within)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("stage `sum` reads from elements 0..8 of scratch buffer `x`"),
            "{err}"
        );
        // A condition reads the first element only.
        scratch_chunks(1, 1, ReadKind::First).unwrap();
        // A range past the buffer says to declare the scratch buffer longer.
        let mut d = Describe::new("P", &[("s", "", 1)]).unwrap();
        d.scratch(0, "x", 8, "0.0");
        d.stage(0, "load", None, 0, "s", 0).unwrap();
        let err = d
            .touch(0, "x", None, Some(4), Some(12), 8, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("declare scratch buffer `x` longer"), "{err}");
    }

    #[test]
    fn disjoint_chunks_run_concurrently_and_the_reader_waits_for_both() {
        let claim = Claim {
            stages: &[0],
            per_iteration: false,
        };
        let plan = StepPlan::new(chunks(4), &[claim]).unwrap();
        assert_eq!(plan.instances.len(), 3);
        let sum = plan.closed.stages.iter().find(|s| s.stage.0 == 2).unwrap();
        assert_eq!(sum.waits.len(), 2);
        assert_eq!(
            plan.instances[0].refs[0],
            Ref {
                buffer: 0,
                write: true,
                element: 0,
                start: 0,
                end: 4
            }
        );
        assert!(
            plan.dot(&["main", "work"], &["x"])
                .contains("\"load[0]\" -> \"sum\"")
        );
    }

    #[test]
    fn out_of_bounds_references_and_streams_are_errors_before_anything_runs() {
        let mut d = Describe::new("P", &[("s", "", 1), ("lane", "2", 2)]).unwrap();
        let err = d.stage(0, "load", Some(5), 1, "work", 2).unwrap_err();
        assert!(err.to_string().contains("`work[2]`"), "{err}");
        d.stage(0, "load", Some(1), 1, "work", 1).unwrap();
        let err = d
            .touch(0, "x", None, Some(4), Some(9), 8, true)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("elements 4..9 of `x`, which holds 8"),
            "{err}"
        );
        let err = d
            .touch(0, "bufs", Some((3, 2)), None, None, 8, true)
            .unwrap_err();
        assert!(err.to_string().contains("`bufs[3]`"), "{err}");
    }

    #[test]
    fn overlapping_references_of_one_statement_are_errors_when_one_is_written() {
        let mut d = Describe::new("P", &[("s", "", 1)]).unwrap();
        d.stage(0, "copy", None, 0, "main", 0).unwrap();
        d.statement().unwrap();
        d.touch(0, "x", None, Some(0), Some(4), 8, false).unwrap();
        let err = d
            .touch(0, "x", None, Some(3), Some(7), 8, true)
            .unwrap_err();
        assert!(err.to_string().contains("they overlap"), "{err}");
        // Apart, or both read, or in another statement: fine.
        d.touch(0, "x", None, Some(4), Some(8), 8, true).unwrap();
        d.touch(0, "x", None, Some(0), Some(2), 8, false).unwrap();
        d.touch(0, "x", None, Some(5), Some(6), 8, false)
            .unwrap_err();
        d.statement().unwrap();
        d.touch(0, "x", None, Some(0), Some(8), 8, true).unwrap();
    }

    #[test]
    fn a_claim_the_ranges_contradict_is_an_error() {
        // Both chunks write element 4.
        let mut d = Describe::new("P", &[("s", "", 1), ("lane", "2", 2)]).unwrap();
        for i in 0..2 {
            d.stage(i, if i == 0 { "a" } else { "b" }, None, 1, "work", i)
                .unwrap();
            d.touch(0, "x", None, Some(4 * i), Some(4 * i + 5), 9, true)
                .unwrap();
        }
        let claim = Claim {
            stages: &[0, 1],
            per_iteration: false,
        };
        let err = StepPlan::new(d.finish(), &[claim]).unwrap_err();
        assert!(
            err.to_string().contains("`concurrent(a, b)` does not hold"),
            "{err}"
        );
    }

    #[test]
    fn plans_are_cached_until_the_description_changes() {
        let mut cache = None;
        let first = plan_for(&mut cache, chunks(4), &[]).unwrap();
        let again = plan_for(&mut cache, chunks(4), &[]).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let other = plan_for(&mut cache, chunks(5), &[]).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
    }

    #[test]
    fn step_modes_alternate_event_sets() {
        let first = StepMode::Ahead {
            first: true,
            last: false,
            parity: false,
        };
        assert!(first.forks() && !first.joins() && !first.waits_on_previous());
        assert_eq!(first.event_sets(3), (0, 3));
        let next = StepMode::Ahead {
            first: false,
            last: true,
            parity: true,
        };
        assert_eq!(next.event_sets(3), (3, 0));
        assert!(next.joins() && next.waits_on_previous());
        assert_eq!(StepMode::Closed.event_sets(3), (0, 0));
    }
}
