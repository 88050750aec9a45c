//! Stream capture: recording work into a graph instead of running it.
//!
//! A capture begins on an *origin* stream. Each stream taking part keeps a *frontier*: the
//! graph nodes its next captured work depends on. Recording an event on a capturing stream
//! stores that stream's frontier in the event; a stream that waits on such an event joins the
//! capture (or, already in it, adds the frontier to its own). This is CUDA's fork/join rule,
//! and ending the capture checks the join: every node on a forked stream's frontier must be an
//! ancestor of the origin's frontier.

use std::sync::{Arc, Mutex};

use super::clock::Timeline;
use super::graph::{Graph, Node};
use super::op::Op;
use super::shared::lock;
use crate::vocab::fault::CpuFault;

/// One capture in progress, shared by the streams that take part in it.
#[derive(Debug)]
pub(super) struct CaptureSession {
    pub(super) origin: Timeline,
    pub(super) origin_name: Arc<str>,
    state: Mutex<CaptureState>,
}

#[derive(Debug)]
struct CaptureState {
    nodes: Vec<Node>,
    members: Vec<Member>,
    /// The first illegal operation; ending the capture then fails with it.
    invalidated: Option<CpuFault>,
    ended: bool,
}

/// A stream taking part in the capture.
#[derive(Debug)]
struct Member {
    timeline: Timeline,
    name: Arc<str>,
    frontier: Vec<usize>,
}

impl CaptureSession {
    /// A capture begun on `origin`.
    pub(super) fn begin(timeline: Timeline, name: &Arc<str>) -> Arc<Self> {
        Arc::new(CaptureSession {
            origin: timeline,
            origin_name: name.clone(),
            state: Mutex::new(CaptureState {
                nodes: Vec::new(),
                members: vec![Member {
                    timeline,
                    name: name.clone(),
                    frontier: Vec::new(),
                }],
                invalidated: None,
                ended: false,
            }),
        })
    }

    /// Whether `end` already ran (streams then leave the capture lazily).
    pub(super) fn is_ended(&self) -> bool {
        lock(&self.state).ended
    }

    /// Records `op` as a node after `timeline`'s frontier.
    pub(super) fn add_op(&self, timeline: Timeline, op: Op) -> Result<(), CpuFault> {
        let mut state = lock(&self.state);
        let stream = state.member(timeline).map(|m| m.name.clone());
        let stream = stream.unwrap_or_else(|| self.origin_name.clone());
        if let Some(reason) = &state.invalidated {
            return Err(self.invalidated_fault(reason.clone()));
        }
        if op.is_one_shot() {
            // Refused, and the capture stays valid: the crate's CUDA backend refuses a
            // one-shot host function before the driver sees it, so both backends agree.
            return Err(CpuFault::OneShotInCapture {
                stream,
                op: Arc::from(op.label()),
            });
        }
        if let Some(node) = Node::from_op(op, stream) {
            state.append(timeline, node);
        }
        Ok(())
    }

    /// Records a whole graph (a launch on a capturing stream) after `timeline`'s frontier.
    pub(super) fn add_graph(&self, timeline: Timeline, nodes: &[Node]) -> Result<(), CpuFault> {
        let mut state = lock(&self.state);
        if let Some(reason) = &state.invalidated {
            return Err(self.invalidated_fault(reason.clone()));
        }
        let base = state.nodes.len();
        let frontier = state.frontier(timeline);
        let mut has_dependents = vec![false; nodes.len()];
        for node in nodes {
            let mut node = node.clone();
            if node.dependencies.is_empty() {
                node.dependencies = frontier.clone();
            } else {
                for dep in &mut node.dependencies {
                    has_dependents[*dep] = true;
                    *dep += base;
                }
            }
            state.nodes.push(node);
        }
        if !nodes.is_empty() {
            let sinks = (0..nodes.len()).filter(|&i| !has_dependents[i]);
            let sinks = sinks.map(|i| i + base).collect();
            state.set_frontier(timeline, sinks);
        }
        Ok(())
    }

    /// `timeline`'s frontier, for an event recorded there.
    pub(super) fn frontier(&self, timeline: Timeline) -> Vec<usize> {
        lock(&self.state).frontier(timeline)
    }

    /// A wait on an event of this capture: `stream` joins (or widens its frontier).
    pub(super) fn join(&self, timeline: Timeline, name: &Arc<str>, frontier: &[usize]) {
        let mut state = lock(&self.state);
        match state.members.iter_mut().find(|m| m.timeline == timeline) {
            Some(member) => {
                for &node in frontier {
                    if !member.frontier.contains(&node) {
                        member.frontier.push(node);
                    }
                }
            }
            None => state.members.push(Member {
                timeline,
                name: name.clone(),
                frontier: frontier.to_vec(),
            }),
        }
    }

    /// Marks the capture failed; the first reason is kept.
    pub(super) fn invalidate(&self, reason: CpuFault) {
        let mut state = lock(&self.state);
        if state.invalidated.is_none() && !state.ended {
            state.invalidated = Some(reason);
        }
    }

    /// Ends the capture: the graph, or why there is none; plus every member, so the caller can
    /// take them out of capture mode.
    pub(super) fn end(&self) -> Result<Graph, CpuFault> {
        let mut state = lock(&self.state);
        state.ended = true;
        if let Some(reason) = state.invalidated.take() {
            return Err(self.invalidated_fault(reason));
        }
        let unjoined = state.unjoined(self.origin);
        if !unjoined.is_empty() {
            return Err(CpuFault::CaptureUnjoined {
                origin: self.origin_name.clone(),
                unjoined,
            });
        }
        let nodes = std::mem::take(&mut state.nodes);
        Ok(Graph::from_nodes(nodes))
    }

    fn invalidated_fault(&self, reason: CpuFault) -> CpuFault {
        CpuFault::CaptureInvalidated {
            origin: self.origin_name.clone(),
            reason: Box::new(reason),
        }
    }
}

impl CaptureState {
    fn member(&self, timeline: Timeline) -> Option<&Member> {
        self.members.iter().find(|m| m.timeline == timeline)
    }

    fn frontier(&self, timeline: Timeline) -> Vec<usize> {
        self.member(timeline)
            .map(|m| m.frontier.clone())
            .unwrap_or_default()
    }

    fn set_frontier(&mut self, timeline: Timeline, frontier: Vec<usize>) {
        if let Some(member) = self.members.iter_mut().find(|m| m.timeline == timeline) {
            member.frontier = frontier;
        }
    }

    fn append(&mut self, timeline: Timeline, mut node: Node) {
        node.dependencies = self.frontier(timeline);
        self.nodes.push(node);
        let index = self.nodes.len() - 1;
        self.set_frontier(timeline, vec![index]);
    }

    /// Streams with frontier nodes that the origin's frontier does not descend from.
    fn unjoined(&self, origin: Timeline) -> Vec<Arc<str>> {
        let mut joined = vec![false; self.nodes.len()];
        let mut stack = self.frontier(origin);
        while let Some(node) = stack.pop() {
            if !std::mem::replace(&mut joined[node], true) {
                stack.extend_from_slice(&self.nodes[node].dependencies);
            }
        }
        self.members
            .iter()
            .filter(|m| m.timeline != origin && m.frontier.iter().any(|&n| !joined[n]))
            .map(|m| m.name.clone())
            .collect()
    }
}
