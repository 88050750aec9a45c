//! From a schedule to an enqueue plan: per stage, in enqueue order, the events it waits on
//! and the event it records; for the step, whether the origin records the fork event and
//! which events it joins.
//!
//! Events are numbered slots. A closed step (fork, stages, join) uses one set of slots. Steps
//! that run ahead use two sets, alternately: step `k + 1` waits on the slots step `k` recorded
//! (`ahead_waits`) while recording its own into the other set, so no record of step `k + 1`
//! overwrites one that a wait of the same step still refers to.

use crate::graph::{Edge, Node, Schedule, StageId, StreamId, schedule};

/// One stage as an enqueue runs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlannedStage {
    /// The stage (its index in program order).
    pub stage: StageId,
    /// Whether its stream waits on the origin's fork event first (a closed step, or the first
    /// of steps that run ahead).
    pub fork: bool,
    /// Event slots of this step to wait on, recorded by earlier stages of this step.
    pub waits: Vec<usize>,
    /// Event slots of the step before to wait on, when this step runs ahead of it.
    pub ahead_waits: Vec<usize>,
    /// The event slot to record after the stage, if any stage (or the join) waits for it.
    pub record: Option<usize>,
}

/// How to enqueue one step.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The stages in enqueue order: topological, program order wherever that is free.
    pub stages: Vec<PlannedStage>,
    /// Event slots one step uses.
    pub events: usize,
    /// Whether the origin records the fork event at the start of the step.
    pub fork: bool,
    /// Event slots the origin waits on at the end of the step (the join).
    pub join: Vec<usize>,
}

impl Plan {
    /// Event records one closed step makes, the fork's included.
    pub fn records(&self) -> usize {
        self.stages.iter().filter(|s| s.record.is_some()).count() + usize::from(self.fork)
    }

    /// Stream waits one closed step makes: each stage's waits, the forks and the joins.
    pub fn waits(&self) -> usize {
        self.stages
            .iter()
            .map(|s| s.waits.len() + usize::from(s.fork))
            .sum::<usize>()
            + self.join.len()
    }
}

/// The plan of a closed step: fork, the stages with the schedule's waits, join.
pub fn plan(nodes: &[Node], schedule: &Schedule) -> Plan {
    build(nodes, schedule, &[], &schedule.events)
}

/// The plan of a step that runs ahead of the one before it (a step of the same stages):
/// besides its own waits, each stage waits only for the stages of the step before that it
/// conflicts with (or is declared `after`), through `ahead_waits`; with the plan's `fork`
/// used on the first step only and its `join` on the last. `schedule` is
/// `schedule(stream_count, nodes)`; the cross-step waits are the transitive reduction of two
/// consecutive steps' orderings, given stream order and the steps' own waits.
pub fn plan_ahead(stream_count: usize, nodes: &[Node], schedule_one: &Schedule) -> Plan {
    let n = nodes.len();
    // Two steps as one program; the second copy's `after`s point into itself. An `after`
    // keeps applying across steps, as it does between closed steps: `b after a` also orders
    // the next step's `a` after this step's `b`, so the two never overlap (two library calls
    // ordered only by `after`). (`b` of the next step needs no wait for `a` of this one: it
    // waits for the next `a`, which runs after this one on its stream.)
    let mut twice: Vec<Node> = nodes.to_vec();
    twice.extend(nodes.iter().enumerate().map(|(id, node)| {
        let mut after: Vec<StageId> = node
            .after
            .iter()
            .map(|&StageId(a)| StageId(a + n))
            .collect();
        after.extend(
            nodes
                .iter()
                .enumerate()
                .filter(|(_, other)| other.after.contains(&StageId(id)))
                .map(|(later, _)| StageId(later)),
        );
        Node {
            stream: node.stream,
            accesses: node.accesses.clone(),
            after,
        }
    }));
    let cross: Vec<Edge> = match schedule(stream_count, &twice) {
        Ok(two) => two
            .edges
            .into_iter()
            .filter(|e| e.from.0 < n && e.to.0 >= n)
            .map(|e| Edge {
                from: e.from,
                to: StageId(e.to.0 - n),
                reasons: e.reasons,
            })
            .collect(),
        // A cycle of `after`s: the single step has one too and was rejected before; order
        // everything after the step before, conservatively.
        Err(_) => Vec::new(),
    };
    let mut events = schedule_one.events.clone();
    events.extend(cross.iter().map(|e| e.from));
    events.sort();
    events.dedup();
    build(nodes, schedule_one, &cross, &events)
}

fn build(nodes: &[Node], schedule: &Schedule, cross: &[Edge], events: &[StageId]) -> Plan {
    let slot = |stage: StageId| events.binary_search(&stage).ok();
    let mut forked: Vec<StreamId> = schedule.fork.clone();
    let stages = schedule
        .order
        .iter()
        .map(|&stage| {
            let stream = nodes.get(stage.0).map_or(StreamId(0), |n| n.stream);
            let fork = match forked.iter().position(|&s| s == stream) {
                Some(at) => {
                    forked.remove(at);
                    true
                }
                None => false,
            };
            let waits = schedule
                .edges
                .iter()
                .filter(|e| e.to == stage)
                .filter_map(|e| slot(e.from))
                .collect();
            let ahead_waits = cross
                .iter()
                .filter(|e| e.to == stage)
                .filter_map(|e| slot(e.from))
                .collect();
            PlannedStage {
                stage,
                fork,
                waits,
                ahead_waits,
                record: slot(stage),
            }
        })
        .collect();
    let join = schedule
        .join
        .iter()
        .filter_map(|&stream| {
            let last = schedule
                .order
                .iter()
                .rev()
                .find(|s| nodes.get(s.0).is_some_and(|n| n.stream == stream))?;
            slot(*last)
        })
        .collect();
    Plan {
        stages,
        events: events.len(),
        fork: !schedule.fork.is_empty(),
        join,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Access, BufferId, Extent, Mode};

    /// A buffer, how, and maybe an element range.
    type Touch = (usize, Mode, Option<(u64, u64)>);

    fn node(stream: usize, accesses: &[Touch]) -> Node {
        Node {
            stream: StreamId(stream),
            accesses: accesses
                .iter()
                .map(|&(b, mode, extent)| Access {
                    buffer: BufferId(b),
                    mode,
                    extent: extent.map(|(s, e)| Extent::new(s, e)),
                })
                .collect(),
            after: Vec::new(),
        }
    }

    #[test]
    fn a_closed_plan_waits_records_forks_and_joins() {
        // s0: produce x; s1: consume x.
        let nodes = [
            node(0, &[(0, Mode::Write, None)]),
            node(1, &[(0, Mode::Read, None)]),
        ];
        let one = schedule(2, &nodes).unwrap();
        let plan = plan(&nodes, &one);
        assert_eq!(plan.events, 2);
        assert!(
            !plan.fork,
            "stream 1's first stage already waits for stream 0"
        );
        assert_eq!(plan.stages[0].record, Some(0));
        assert_eq!(plan.stages[1].waits, vec![0]);
        assert_eq!(plan.stages[1].record, Some(1));
        assert_eq!(plan.join, vec![1]);
        assert_eq!(plan.records(), 2);
        assert_eq!(plan.waits(), 2);
    }

    #[test]
    fn disjoint_ranges_of_one_buffer_need_no_wait() {
        let nodes = [
            node(0, &[(0, Mode::Write, Some((0, 8)))]),
            node(1, &[(0, Mode::Write, Some((8, 16)))]),
            node(2, &[(0, Mode::Read, Some((7, 9)))]),
        ];
        let pairs: Vec<(usize, usize)> = schedule(3, &nodes)
            .unwrap()
            .edges
            .iter()
            .map(|e| (e.from.0, e.to.0))
            .collect();
        assert_eq!(pairs, vec![(0, 2), (1, 2)]);
        // An empty range touches nothing.
        let nodes = [
            node(0, &[(0, Mode::Write, Some((4, 4)))]),
            node(1, &[(0, Mode::Write, None)]),
        ];
        assert!(schedule(2, &nodes).unwrap().edges.is_empty());
    }

    #[test]
    fn a_step_ahead_waits_only_for_the_stages_it_conflicts_with() {
        // Two independent chunks, each copied in on its own stream and computed on stream 0:
        // the next step's copy of chunk 0 waits for this step's compute of chunk 0 only.
        let nodes = [
            node(1, &[(0, Mode::Write, Some((0, 4)))]),
            node(2, &[(0, Mode::Write, Some((4, 8)))]),
            node(0, &[(0, Mode::Write, Some((0, 4)))]),
            node(0, &[(0, Mode::Write, Some((4, 8)))]),
        ];
        let one = schedule(3, &nodes).unwrap();
        let ahead = plan_ahead(3, &nodes, &one);
        let stage = |id: usize| ahead.stages.iter().find(|s| s.stage.0 == id).unwrap();
        let slot = |id: usize| stage(id).record.unwrap();
        // Stage 0 (next step) after stage 2 (this step): WAW on chunk 0, cross-stream.
        assert_eq!(stage(0).ahead_waits, vec![slot(2)]);
        assert_eq!(stage(1).ahead_waits, vec![slot(3)]);
        // Stream 0 is ordered with itself: no wait.
        assert!(stage(2).ahead_waits.is_empty());
        assert!(stage(3).ahead_waits.is_empty());
        // A closed plan of the same stages records fewer events.
        let closed = plan(&nodes, &one);
        assert!(closed.events <= ahead.events);
    }

    #[test]
    fn after_holds_within_each_step_ahead() {
        let mut second = node(1, &[]);
        second.after = vec![StageId(0)];
        let nodes = [node(0, &[]), second];
        let one = schedule(2, &nodes).unwrap();
        let ahead = plan_ahead(2, &nodes, &one);
        let stage1 = ahead.stages.iter().find(|s| s.stage.0 == 1).unwrap();
        let slot0 = ahead.stages.iter().find(|s| s.stage.0 == 0).unwrap().record;
        assert_eq!(stage1.waits, vec![slot0.unwrap()]);
        assert!(stage1.ahead_waits.is_empty());
        // Across steps too: the next step's stage 0 waits for this step's stage 1, so the two
        // never overlap (issue 23: two library calls ordered only by `after` overlapped).
        let stage0 = ahead.stages.iter().find(|s| s.stage.0 == 0).unwrap();
        assert_eq!(stage0.ahead_waits, vec![stage1.record.unwrap()]);
    }
}
