//! Device loops of one graph run one at a time, and so does every conditional node beside one.
//!
//! The driver faults ("unspecified launch failure", the context lost) when WHILE conditional
//! nodes of one graph run concurrently: a raw-CUDA graph of four to thirty-two parallel
//! `K0 -> WHILE { K }` loops failed within 100 new graphs on H100s with driver 580.159.04,
//! while the same loops each after the one before, parallel IFs, and loops whose bodies held
//! two kernels never did (`benches/anchors/parallel_while.cu`). A one-node body is what the
//! library's loops with empty bodies and kernel-set `while`s build. Ordering the loops alone
//! was not enough: a graph of parallel `if`/`else` nodes beside chained loops still faulted
//! (`graph_build`'s comparison test, H100, 2026-11-29). So before a graph is instantiated,
//! every scope that holds a loop gets its conditional nodes (loops, `if`s, `switch`es) in a
//! chain: an edge from each to the next in a topological order of the scope, where no path
//! orders them yet, which cannot close a cycle. A node whose body holds a loop makes its own
//! scope hold one, so a loop in an `if` body waits for the conditional nodes beside that `if`
//! too. Scopes without a loop keep their conditional nodes parallel. Results do not change
//! (the nodes had no order to keep); only their overlap goes.
//!
//! Graphs with loops launched at once on separate streams fault the same way (the
//! reproducer's mode 6); an edge cannot reach across graphs, so their launches are ordered
//! instead (`lane.rs`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::*;

/// The conditional nodes of each scope, which of the scopes hold a loop, and which scope each
/// body lies in.
#[derive(Default)]
pub(super) struct LoopNodes {
    /// Per scope (0: the graph itself), its conditional nodes in the order they were added.
    conditionals: Vec<Vec<sys::CUgraphNode>>,
    /// Per scope: whether it holds a loop (a WHILE node, or a conditional node whose body
    /// holds one).
    looping: Vec<bool>,
    /// Per body scope `k` (at `k - 1`): the scope of the conditional node it is a body of.
    parents: Vec<usize>,
}

impl LoopNodes {
    /// Body scope `scope` (the next one numbered) belongs to a conditional node of `parent`.
    pub(super) fn body(&mut self, scope: usize, parent: usize) {
        debug_assert_eq!(
            scope,
            self.parents.len() + 1,
            "bodies are numbered in order"
        );
        self.parents.push(parent);
    }

    /// `node`, just added to `scope`, is a conditional node.
    pub(super) fn conditional(&mut self, scope: usize, node: sys::CUgraphNode) {
        if self.conditionals.len() <= scope {
            self.conditionals.resize_with(scope + 1, Vec::new);
        }
        self.conditionals[scope].push(node);
    }

    /// A loop was added to `scope`: it, and every scope holding it (up to the graph itself),
    /// now hold a loop.
    pub(super) fn add_loop(&mut self, mut scope: usize) {
        loop {
            if self.looping.len() <= scope {
                self.looping.resize(scope + 1, false);
            }
            if std::mem::replace(&mut self.looping[scope], true) {
                return;
            }
            match scope.checked_sub(1).and_then(|k| self.parents.get(k)) {
                Some(&parent) => scope = parent,
                None => return,
            }
        }
    }

    /// Whether the graph has a loop anywhere (a loop in a body makes the graph itself hold
    /// one).
    pub(super) fn has_loop(&self) -> bool {
        self.looping.first() == Some(&true)
    }

    /// The scopes that hold a loop and two conditional nodes or more, and their conditional
    /// nodes: what must run one after another.
    fn several(&self) -> impl Iterator<Item = (usize, &[sys::CUgraphNode])> {
        self.conditionals
            .iter()
            .enumerate()
            .filter(|&(scope, nodes)| nodes.len() > 1 && self.looping.get(scope) == Some(&true))
            .map(|(scope, nodes)| (scope, nodes.as_slice()))
    }
}

/// The edges to add so that `loops` run one after another: from each loop to the next in a
/// topological order of `nodes` (the scope's nodes, in the driver's order) under `edges`,
/// where no path joins them yet.
fn ordering_edges(
    nodes: &[sys::CUgraphNode],
    edges: &[(sys::CUgraphNode, sys::CUgraphNode)],
    loops: &[sys::CUgraphNode],
) -> Vec<(sys::CUgraphNode, sys::CUgraphNode)> {
    let index: HashMap<sys::CUgraphNode, usize> =
        nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut after = vec![Vec::new(); nodes.len()];
    let mut waiting = vec![0usize; nodes.len()];
    for (from, to) in edges {
        if let (Some(&f), Some(&t)) = (index.get(from), index.get(to)) {
            after[f].push(t);
            waiting[t] += 1;
        }
    }
    // Kahn's order, ties broken by the driver's node order, so the same build gets the same
    // edges (an update from a new capture matches the first instantiation).
    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut position = vec![usize::MAX; nodes.len()];
    let mut next = 0;
    while let Some(Reverse(i)) = ready.pop() {
        position[i] = next;
        next += 1;
        for &t in &after[i] {
            waiting[t] -= 1;
            if waiting[t] == 0 {
                ready.push(Reverse(t));
            }
        }
    }
    let mut ordered: Vec<usize> = loops
        .iter()
        .filter_map(|n| index.get(n).copied())
        .filter(|&i| position[i] != usize::MAX)
        .collect();
    ordered.sort_by_key(|&i| position[i]);
    let mut added = Vec::new();
    for pair in ordered.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        if !reaches(&after, from, to) {
            after[from].push(to);
            added.push((nodes[from], nodes[to]));
        }
    }
    added
}

/// Whether a path leads from `from` to `to`.
fn reaches(after: &[Vec<usize>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; after.len()];
    let mut stack = vec![from];
    while let Some(i) = stack.pop() {
        if i == to {
            return true;
        }
        if !std::mem::replace(&mut seen[i], true) {
            stack.extend(&after[i]);
        }
    }
    false
}

impl Graph {
    /// Chains the conditional nodes of every scope that holds a loop (see the module's
    /// comment). Cheap when no such scope has two: nothing is asked of the driver.
    pub(crate) fn order_loops(&self) -> Result<()> {
        const CALL: &str = "Graph::instantiate";
        for (scope, loops) in self.loops.several() {
            let nodes = self.scope_nodes(CALL, scope)?;
            let edges = self.edges(scope)?;
            let target = self.scope_raw(CALL, scope)?;
            for (from, to) in ordering_edges(&nodes, &edges, loops) {
                let d = self.handle.ctx.bind()?;
                let _guard = self.handle.lock();
                // SAFETY: a live graph (or body of it) and two of its nodes, one edge, from a
                // node earlier in a topological order to a later one (no cycle).
                check("cuGraphAddDependencies", unsafe {
                    (d.cuGraphAddDependencies)(target, &from, &to, 1)
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(i: usize) -> sys::CUgraphNode {
        (0x1000 + 16 * i) as sys::CUgraphNode
    }

    /// Four parallel loops (each after its own first kernel) are chained in node order, and
    /// an existing path is not doubled.
    #[test]
    fn parallel_loops_are_chained_once() {
        // k0 -> w0, k1 -> w1, k2 -> w2, k3 -> w3; w1 -> w2 already.
        let nodes: Vec<_> = (0..8).map(n).collect();
        let edges = vec![
            (n(0), n(1)),
            (n(2), n(3)),
            (n(4), n(5)),
            (n(6), n(7)),
            (n(3), n(5)),
        ];
        let loops = [n(1), n(3), n(5), n(7)];
        let added = ordering_edges(&nodes, &edges, &loops);
        assert_eq!(added, vec![(n(1), n(3)), (n(5), n(7))]);
    }

    /// A later-added node that an edge puts first is ordered first: edges go with the
    /// topological order, never against it.
    #[test]
    fn the_order_follows_the_edges() {
        // w1 -> k0 -> w0 (added in the other order); w2 apart.
        let nodes: Vec<_> = (0..4).map(n).collect();
        let edges = vec![(n(3), n(0)), (n(0), n(1))];
        let loops = [n(1), n(3), n(2)];
        let added = ordering_edges(&nodes, &edges, &loops);
        // Order: w2 (2) and w1 (3) are ready first, w2 by node order; then k0, w0: so
        // w2 -> w1, and w1 already reaches w0.
        assert_eq!(added, vec![(n(2), n(3))]);
        assert!(!added.contains(&(n(1), n(3))), "no edge against a path");
    }

    /// One loop, or loops already in a chain, add nothing.
    #[test]
    fn ordered_loops_add_nothing() {
        let nodes: Vec<_> = (0..3).map(n).collect();
        assert!(ordering_edges(&nodes, &[], &[n(1)]).is_empty());
        let chain = vec![(n(0), n(1)), (n(1), n(2))];
        assert!(ordering_edges(&nodes, &chain, &[n(0), n(2)]).is_empty());
    }

    /// A loop in a body makes every scope holding it a looping one, up to the graph; only
    /// looping scopes with two conditional nodes or more are ordered, all their conditional
    /// nodes together.
    #[test]
    fn a_loop_in_a_body_orders_every_conditional_beside_its_holders() {
        let mut loops = LoopNodes::default();
        loops.conditional(0, n(10));
        loops.body(1, 0); // scope 1: the body of n(10) in scope 0
        loops.conditional(1, n(20));
        loops.body(2, 1); // scope 2: the body of n(20) in scope 1
        loops.conditional(0, n(1)); // an `if` beside n(10)
        loops.conditional(0, n(2)); // a `while` beside it
        loops.add_loop(0);
        loops.conditional(2, n(30)); // a `while` in the innermost body
        loops.add_loop(2);
        loops.conditional(3, n(40)); // two `if`s in a scope without a loop
        loops.conditional(3, n(41));
        assert!(loops.has_loop());
        let several: Vec<_> = loops.several().map(|(s, l)| (s, l.to_vec())).collect();
        assert_eq!(several, vec![(0, vec![n(10), n(1), n(2)])]);
        assert_eq!(loops.looping, vec![true, true, true]);
        let mut ifs = LoopNodes::default();
        ifs.conditional(0, n(1));
        ifs.conditional(0, n(2));
        assert!(!ifs.has_loop() && ifs.several().next().is_none());
    }
}
