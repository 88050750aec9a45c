//! Graphs built node by node on the CPU backend, and the nodes only built graphs have: empty
//! nodes, child graphs, event record and wait nodes, and conditional (`while` / `if`) nodes.
//!
//! A graph being built is addressed by a *path*: the indices of the conditional nodes whose
//! bodies lead to it from the top-level graph (empty for the graph itself). Edges go from an
//! earlier node to a later one, so that the order nodes are added in is a topological order,
//! which a replay runs in.
//!
//! Conditional nodes make the decisions the CUDA condition kernels make
//! (`runtime/kernels/conditions.cu`), on the same state word: its low half counts the
//! iterations of the last run, its high half is set (and stays set until the host clears it)
//! when a `while` stopped at its maximum iteration count with its condition still holding.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::clock::VectorClock;
use super::condition::Condition;
use super::event::{Event, EventShared, LatestRecord, RecordPoint};
use super::graph::{Conditional, Form, Graph, Node, NodeWork};
use super::op::{Keep, LaunchHook, NodeKind, OnLaunch, Op, PerLaunch};
use super::shared::lock;
use crate::vocab::access::{Access, Span, Touch, merge_accesses};
use crate::vocab::fault::CpuFault;

/// The stream a built node reports, where a captured one names the stream it was captured on.
const BUILT: &str = "built graph";

/// An event record or wait node of a built graph. As on CUDA, a launch records or picks the
/// record in stream order, when it is enqueued ([`LaunchHook`]): a record node makes the
/// launch's point at its place in the graph the event's latest record (so a wait enqueued
/// right after the launch waits for it), and a wait node picks the latest record before the
/// launch (which the launch's accesses are then ordered after, in checked mode). The node's
/// run in that launch's replay completes, or waits for, that point; a point the replay did
/// not reach (a failed child graph stops there) is completed when the replay ends, so no
/// wait hangs on it. A node run with no launch of its own (inside a conditional body, which
/// runs any number of times) records or picks when it runs.
#[derive(Debug)]
struct EventNode {
    event: Arc<EventShared>,
    wait: bool,
    /// What queued launches recorded (a record node) or picked (a wait node); `None` for a
    /// wait whose event was not recorded then.
    queued: PerLaunch<Option<Arc<RecordPoint>>>,
}

impl EventNode {
    fn run(&self) -> Result<(), String> {
        match (self.wait, self.queued.take()) {
            (true, Some(picked)) => {
                if let Some(point) = picked {
                    point.wait();
                }
            }
            (true, None) => {
                let latest = lock(&self.event.latest).clone();
                if let LatestRecord::Eager { point, .. } = latest {
                    point.wait();
                }
            }
            (false, Some(Some(point))) => point.complete(),
            (false, _) => {
                let point = Arc::new(RecordPoint::default());
                point.complete();
                *lock(&self.event.latest) = LatestRecord::Eager { point, clock: None };
            }
        }
        Ok(())
    }
}

impl LaunchHook for EventNode {
    fn before(&self, joins: &mut Vec<VectorClock>, launch: u64) {
        if !self.wait {
            return;
        }
        let picked = match lock(&self.event.latest).clone() {
            LatestRecord::Eager { point, clock } => {
                joins.extend(clock);
                Some(point)
            }
            // Never recorded: a no-op, as a wait on it is. A record inside a capture that
            // has not ended cannot be waited for from a launch (nothing orders it).
            LatestRecord::Never | LatestRecord::Captured { .. } => None,
        };
        self.queued.push(launch, picked);
    }

    fn after(&self, clock: Option<&VectorClock>, launch: u64) {
        if self.wait {
            return;
        }
        let point = Arc::new(RecordPoint::default());
        *lock(&self.event.latest) = LatestRecord::Eager {
            point: point.clone(),
            clock: clock.cloned(),
        };
        self.queued.push(launch, Some(point));
    }

    fn end(&self, launch: u64) {
        let left = self.queued.leftover(launch);
        if !self.wait {
            for point in left.into_iter().flatten() {
                point.complete();
            }
        }
    }
}

fn invalid(reason: impl Into<String>) -> CpuFault {
    CpuFault::GraphBuild {
        reason: reason.into(),
    }
}

/// A node with no accesses or arguments of its own.
fn plain(label: &str, kind: NodeKind, work: NodeWork) -> Node {
    Node {
        label: Arc::from(label),
        captured_on: Arc::from(BUILT),
        dependencies: Vec::new(),
        declared: Vec::new(),
        work,
        kind,
        kernel: None,
        host_function: false,
        keep: Arc::from([]),
        stage: None,
    }
}

impl Graph {
    /// The graph (or body) at `path`.
    /// The graph at `path`: pairs of (conditional node index, body number), outermost first.
    fn at(&mut self, path: &[usize]) -> Result<&mut Graph, CpuFault> {
        let mut graph = self;
        for step in path.chunks(2) {
            let &[index, body] = step else {
                return Err(invalid("a conditional body's path is cut short"));
            };
            graph = match graph.nodes.get_mut(index).map(|n| &mut n.work) {
                Some(NodeWork::Conditional(c)) => c
                    .bodies
                    .get_mut(body)
                    .ok_or_else(|| invalid("the conditional node has no such body"))?,
                _ => return Err(invalid("the conditional body belongs to another graph")),
            };
        }
        Ok(graph)
    }

    /// Adds `node` to the graph at `path` after `dependencies`; returns its index there.
    pub(crate) fn add_node(
        &mut self,
        path: &[usize],
        mut node: Node,
        dependencies: &[usize],
    ) -> Result<usize, CpuFault> {
        let graph = self.at(path)?;
        let count = graph.nodes.len();
        if let Some(&bad) = dependencies.iter().find(|&&d| d >= count) {
            return Err(CpuFault::NodeOutOfRange { index: bad, count });
        }
        let mut deps = dependencies.to_vec();
        deps.sort_unstable();
        if deps.windows(2).any(|w| w[0] == w[1]) {
            return Err(invalid("a node lists one dependency twice"));
        }
        node.dependencies = deps;
        graph.nodes.push(node);
        Ok(count)
    }

    /// Adds a replayable operation (a copy, memset, kernel, host function or stream memory
    /// operation) as a node.
    pub(crate) fn add_op(
        &mut self,
        path: &[usize],
        op: Op,
        dependencies: &[usize],
    ) -> Result<usize, CpuFault> {
        let label = op.label().to_owned();
        let node = Node::from_op(op, Arc::from(BUILT)).ok_or_else(|| {
            invalid(format!(
                "`{label}` runs once and cannot be a node of a graph"
            ))
        })?;
        self.add_node(path, node, dependencies)
    }

    /// Adds a node that does nothing.
    pub(crate) fn add_empty(&mut self, path: &[usize], deps: &[usize]) -> Result<usize, CpuFault> {
        self.add_node(path, plain("empty", NodeKind::Empty, NodeWork::Empty), deps)
    }

    /// Adds a node running a copy of `child`'s nodes in order.
    pub(crate) fn add_child(
        &mut self,
        path: &[usize],
        deps: &[usize],
        child: &Graph,
    ) -> Result<usize, CpuFault> {
        if child.has_conditional_nodes() {
            return Err(invalid(
                "a graph with conditional nodes (device `while`/`if`) cannot be a child graph \
                 (a CUDA rule); add its nodes to this graph instead",
            ));
        }
        let mut node = plain(
            "child graph",
            NodeKind::Graph,
            NodeWork::Child(Arc::new(child.clone())),
        );
        node.declared = accesses_of(&child.nodes);
        node.keep = keep_of(&child.nodes, None).into();
        self.add_node(path, node, deps)
    }

    /// Adds an event record (`wait == false`) or wait node.
    pub(crate) fn add_event(
        &mut self,
        path: &[usize],
        deps: &[usize],
        event: &Event,
        wait: bool,
    ) -> Result<usize, CpuFault> {
        let (label, kind) = if wait {
            (format!("wait {}", event.shared.name), NodeKind::EventWait)
        } else {
            (
                format!("record {}", event.shared.name),
                NodeKind::EventRecord,
            )
        };
        let hook = Arc::new(EventNode {
            event: event.shared.clone(),
            wait,
            queued: Default::default(),
        });
        let run = hook.clone();
        let work = NodeWork::Host(Arc::new(move || run.run()));
        let mut node = plain(&label, kind, work);
        node.keep = Arc::from([
            Keep::Object(event.shared.clone()),
            Keep::Object(Arc::new(OnLaunch(hook))),
        ]);
        self.add_node(path, node, deps)
    }

    /// Adds a conditional node of form `form` with `bodies` empty bodies; fill body `b` at
    /// `[path.., index, b]`, then [`Graph::seal_conditional`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_conditional(
        &mut self,
        path: &[usize],
        deps: &[usize],
        label: &str,
        form: Form,
        bodies: usize,
        condition: Condition,
        max_iterations: u32,
        state: Arc<AtomicU64>,
    ) -> Result<usize, CpuFault> {
        if let Condition::Every { modulus: 0, .. } = condition {
            return Err(invalid(
                "an `every` condition needs a modulus of at least 1",
            ));
        }
        let conditional = Conditional {
            form,
            condition,
            max_iterations,
            state,
            bodies: vec![Graph::default(); bodies],
        };
        let work = NodeWork::Conditional(Box::new(conditional));
        let node = plain(label, NodeKind::Conditional, work);
        let index = self.add_node(path, node, deps)?;
        self.seal_conditional(path, index)?;
        Ok(index)
    }

    /// Recomputes what conditional node `index` of the graph at `path` touches and keeps from
    /// its condition and body (after its body changed).
    pub(crate) fn seal_conditional(
        &mut self,
        path: &[usize],
        index: usize,
    ) -> Result<(), CpuFault> {
        let graph = self.at(path)?;
        let node = graph
            .nodes
            .get_mut(index)
            .ok_or_else(|| invalid("no such conditional node"))?;
        let NodeWork::Conditional(c) = &node.work else {
            return Err(invalid("the node is not a conditional node"));
        };
        let all: Vec<Node> = c
            .bodies
            .iter()
            .flat_map(|b| b.nodes.iter().cloned())
            .collect();
        let mut declared = accesses_of(&all);
        let (read, held) = c.condition.touches();
        if let Some(buffer) = read {
            declared.push((buffer, Access::Read, Span::ALL));
        }
        let keep = vec![held, Keep::Object(c.state.clone())];
        node.declared = merge_accesses(declared);
        // A body runs any number of times per launch: its nodes act when they run, not when
        // the launch is enqueued, so their launch hooks are not the graph's.
        let mut keep = keep_of(&all, Some(keep));
        keep.retain(|k| OnLaunch::of(std::slice::from_ref(k)).next().is_none());
        node.keep = keep.into();
        Ok(())
    }

    /// Makes node `to` run after node `from` of the graph at `path`; `from` must come first.
    pub(crate) fn add_dependency(
        &mut self,
        path: &[usize],
        from: usize,
        to: usize,
    ) -> Result<(), CpuFault> {
        let graph = self.at(path)?;
        let count = graph.nodes.len();
        if from >= count || to >= count {
            return Err(CpuFault::NodeOutOfRange {
                index: from.max(to),
                count,
            });
        }
        if from >= to {
            return Err(invalid(
                "on the CPU backend an edge must go from a node added earlier to one added \
                 later (the order nodes are added in is the order a replay runs them in)",
            ));
        }
        let deps = &mut graph.nodes[to].dependencies;
        if !deps.contains(&from) {
            deps.push(from);
            deps.sort_unstable();
        }
        Ok(())
    }

    /// Appends `other`'s nodes (a capture) to the graph at `path`, its roots after
    /// `dependencies`; returns the indices of the appended nodes nothing else depends on (or
    /// `dependencies` when `other` is empty).
    pub(crate) fn splice(
        &mut self,
        path: &[usize],
        dependencies: &[usize],
        other: Graph,
    ) -> Result<Vec<usize>, CpuFault> {
        let graph = self.at(path)?;
        let base = graph.nodes.len();
        if let Some(&bad) = dependencies.iter().find(|&&d| d >= base) {
            return Err(CpuFault::NodeOutOfRange {
                index: bad,
                count: base,
            });
        }
        if other.nodes.is_empty() {
            return Ok(dependencies.to_vec());
        }
        let mut has_dependents = vec![false; other.nodes.len()];
        for mut node in other.nodes {
            if node.dependencies.is_empty() {
                node.dependencies = dependencies.to_vec();
            } else {
                for dep in &mut node.dependencies {
                    has_dependents[*dep] = true;
                    *dep += base;
                }
            }
            graph.nodes.push(node);
        }
        Ok((0..has_dependents.len())
            .filter(|&i| !has_dependents[i])
            .map(|i| i + base)
            .collect())
    }

    /// The edges of the graph at `path` (not counting those inside bodies or child graphs).
    pub(crate) fn edge_count(&self, path: &[usize]) -> Result<usize, CpuFault> {
        let mut graph = self;
        for step in path.chunks(2) {
            let &[index, body] = step else {
                return Err(invalid("a conditional body's path is cut short"));
            };
            graph = match graph.nodes.get(index).map(|n| &n.work) {
                Some(NodeWork::Conditional(c)) => c
                    .bodies
                    .get(body)
                    .ok_or_else(|| invalid("the conditional node has no such body"))?,
                _ => return Err(invalid("the conditional body belongs to another graph")),
            };
        }
        Ok(graph.nodes.iter().map(|n| n.dependencies.len()).sum())
    }

    /// Whether any node (at any depth of child graphs) is a conditional node.
    pub(crate) fn has_conditional_nodes(&self) -> bool {
        self.nodes.iter().any(|n| match &n.work {
            NodeWork::Conditional(_) => true,
            NodeWork::Child(child) => child.has_conditional_nodes(),
            _ => false,
        })
    }
}

/// Every access of `nodes`, merged.
fn accesses_of(nodes: &[Node]) -> Vec<Touch> {
    merge_accesses(nodes.iter().flat_map(Node::accesses).collect())
}

/// Everything `nodes` keep, once each, after `first`.
fn keep_of(nodes: &[Node], first: Option<Vec<Keep>>) -> Vec<Keep> {
    let mut keep = first.unwrap_or_default();
    for item in nodes.iter().flat_map(|n| n.keep().iter()) {
        if !keep.iter().any(|k| k.key() == item.key()) {
            keep.push(item.clone());
        }
    }
    keep
}
