//! Device loops of one graph run one at a time.
//!
//! The driver faults ("unspecified launch failure", the context lost) when WHILE conditional
//! nodes of one graph run concurrently: a raw-CUDA graph of four to thirty-two parallel
//! `K0 -> WHILE { K }` loops failed within 100 new graphs on H100s with driver 580.159.04,
//! while the same loops each after the one before, parallel IFs, and loops whose bodies held
//! two kernels never did (`benches/anchors/parallel_while.cu`). A one-node body is what the
//! library's loops with empty bodies and kernel-set `while`s build. Rather than bet on that
//! being the only trigger, every loop is ordered: before a graph is instantiated, the loops of
//! each scope that no path orders yet get an edge from each to the next in a topological
//! order of the scope, which cannot close a cycle. A node whose body holds a loop counts as a
//! loop of its own scope, so a loop in an `if` body waits for the loops beside that `if`
//! too. Results do not change (the loops had no order to keep); only their overlap goes.
//!
//! Not covered: loops of different graphs launched at once on different streams fault the
//! same way (the reproducer's mode 6: eight or more such graphs), and an edge cannot reach
//! across graphs; `Graph::instantiate` says so to the user.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::*;

/// Which nodes of each scope are loops (or hold one), and whose body each scope is.
#[derive(Default)]
pub(super) struct LoopNodes {
    /// Per scope (0: the graph itself), its loop nodes in the order they became loops.
    loops: Vec<Vec<sys::CUgraphNode>>,
    /// Per body scope `k` (at `k - 1`): the scope and conditional node the body belongs to.
    parents: Vec<(usize, sys::CUgraphNode)>,
}

impl LoopNodes {
    /// Body scope `scope` (the next one numbered) belongs to `node` of `parent`.
    pub(super) fn body(&mut self, scope: usize, parent: usize, node: sys::CUgraphNode) {
        debug_assert_eq!(
            scope,
            self.parents.len() + 1,
            "bodies are numbered in order"
        );
        self.parents.push((parent, node));
    }

    /// `node` of `scope` is a loop: it, and the node whose body holds it (up to the graph
    /// itself), now count as loops.
    pub(super) fn add(&mut self, mut scope: usize, mut node: sys::CUgraphNode) {
        loop {
            if self.loops.len() <= scope {
                self.loops.resize_with(scope + 1, Vec::new);
            }
            if self.loops[scope].contains(&node) {
                return;
            }
            self.loops[scope].push(node);
            match scope.checked_sub(1).and_then(|k| self.parents.get(k)) {
                Some(&(parent, holder)) => (scope, node) = (parent, holder),
                None => return,
            }
        }
    }

    /// The scopes with two loops or more, and their loops.
    fn several(&self) -> impl Iterator<Item = (usize, &[sys::CUgraphNode])> {
        self.loops
            .iter()
            .enumerate()
            .filter(|(_, loops)| loops.len() > 1)
            .map(|(scope, loops)| (scope, loops.as_slice()))
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
    /// Orders the loops of every scope that has several (see the module's comment). Cheap
    /// when no scope has two: nothing is asked of the driver.
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

    /// A loop in a body makes the body's node a loop of its scope, up to the graph.
    #[test]
    fn a_loop_in_a_body_marks_its_holders() {
        let mut loops = LoopNodes::default();
        loops.body(1, 0, n(10)); // scope 1: the body of n(10) in scope 0
        loops.body(2, 1, n(20)); // scope 2: the body of n(20) in scope 1
        loops.add(0, n(1));
        loops.add(2, n(30));
        let several: Vec<_> = loops.several().map(|(s, l)| (s, l.to_vec())).collect();
        assert_eq!(several, vec![(0, vec![n(1), n(10)])]);
        assert_eq!(loops.loops[1], vec![n(20)]);
        assert_eq!(loops.loops[2], vec![n(30)]);
    }
}
