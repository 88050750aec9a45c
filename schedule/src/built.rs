//! The edges of a step built as a graph straight from its stage graph: stream order between
//! consecutive stages of one stream plus the reduced cross-stream waits, transitively reduced
//! together (a wait can make a stream-order edge redundant), so the graph has no edge the
//! data does not need.

use std::collections::BTreeSet;

use crate::graph::{Edge, StageId, StreamId};

/// The reduced stage-level edges, sorted by `(from, to)`. `streams[i]` is stage `i`'s
/// stream, `order` the order the stages are enqueued in (topological; consecutive stages of
/// one stream in it are stream-ordered), `waits` the reduced cross-stream edges.
pub fn stage_edges(
    streams: &[StreamId],
    order: &[StageId],
    waits: &[Edge],
) -> Vec<(StageId, StageId)> {
    let count = streams.len();
    let mut candidates: BTreeSet<(usize, usize)> = BTreeSet::new();
    // Stream order: each stage after the previous stage of its stream.
    let mut last: Vec<Option<usize>> = Vec::new();
    for &StageId(stage) in order {
        let Some(stream) = streams.get(stage) else {
            continue;
        };
        if last.len() <= stream.0 {
            last.resize(stream.0 + 1, None);
        }
        if let Some(previous) = last[stream.0].replace(stage) {
            candidates.insert((previous, stage));
        }
    }
    for wait in waits {
        if wait.from.0 < count && wait.to.0 < count {
            candidates.insert((wait.from.0, wait.to.0));
        }
    }
    let mut successors = vec![Vec::new(); count];
    for &(from, to) in &candidates {
        successors[from].push(to);
    }
    // reach[i]: every stage reachable from i by one or more edges, filled in reverse
    // topological order.
    let words = count.div_ceil(64).max(1);
    let mut reach = vec![vec![0u64; words]; count];
    for &StageId(stage) in order.iter().rev() {
        if stage >= count {
            continue;
        }
        let mut set = vec![0u64; words];
        for &next in &successors[stage] {
            set[next / 64] |= 1 << (next % 64);
            for (word, more) in set.iter_mut().zip(&reach[next]) {
                *word |= more;
            }
        }
        reach[stage] = set;
    }
    let reaches = |from: usize, to: usize| reach[from][to / 64] & (1 << (to % 64)) != 0;
    candidates
        .iter()
        .filter(|&&(from, to)| {
            !successors[from]
                .iter()
                .any(|&middle| middle != to && reaches(middle, to))
        })
        .map(|&(from, to)| (StageId(from), StageId(to)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(from: usize, to: usize) -> Edge {
        Edge {
            from: StageId(from),
            to: StageId(to),
            reasons: Vec::new(),
        }
    }

    fn order(count: usize) -> Vec<StageId> {
        (0..count).map(StageId).collect()
    }

    #[test]
    fn a_wait_makes_the_stream_order_edge_it_implies_redundant() {
        // a (s0) -> b (s1) -> c (s0): a -> c is implied by a -> b -> c.
        let streams = [StreamId(0), StreamId(1), StreamId(0)];
        let edges = stage_edges(&streams, &order(3), &[wait(0, 1), wait(1, 2)]);
        assert_eq!(
            edges,
            vec![(StageId(0), StageId(1)), (StageId(1), StageId(2))]
        );
    }

    #[test]
    fn independent_streams_have_only_their_own_order() {
        let streams = [StreamId(0), StreamId(1), StreamId(0), StreamId(1)];
        let edges = stage_edges(&streams, &order(4), &[]);
        assert_eq!(
            edges,
            vec![(StageId(0), StageId(2)), (StageId(1), StageId(3))]
        );
    }

    #[test]
    fn a_diamond_keeps_its_four_edges() {
        // a (s0) forks to b (s1) and c (s0); d (s0) joins b.
        let streams = [StreamId(0), StreamId(1), StreamId(0), StreamId(0)];
        let edges = stage_edges(&streams, &order(4), &[wait(0, 1), wait(1, 3)]);
        assert_eq!(
            edges,
            vec![
                (StageId(0), StageId(1)),
                (StageId(0), StageId(2)),
                (StageId(1), StageId(3)),
                (StageId(2), StageId(3)),
            ]
        );
    }

    /// Every stage pair `(i, j)` with `j` reachable from `i` over `edges`.
    fn closure(count: usize, edges: &[(usize, usize)]) -> BTreeSet<(usize, usize)> {
        let mut reach = BTreeSet::new();
        for start in 0..count {
            let mut stack = vec![start];
            while let Some(at) = stack.pop() {
                for &(from, to) in edges {
                    if from == at && reach.insert((start, to)) {
                        stack.push(to);
                    }
                }
            }
        }
        reach
    }

    proptest::proptest! {
        /// On random stage sets (streams, forward waits): the result orders exactly what
        /// stream order and the waits order, and no edge of it is implied by the others.
        #[test]
        fn the_reduction_keeps_the_order_and_drops_every_implied_edge(
            streams in proptest::collection::vec(0usize..3, 1..9),
            raw in proptest::collection::vec((0usize..9, 0usize..9), 0..12),
        ) {
            let count = streams.len();
            let streams: Vec<StreamId> = streams.into_iter().map(StreamId).collect();
            let waits: Vec<Edge> = raw
                .into_iter()
                .filter(|&(a, b)| a < b && b < count)
                .map(|(a, b)| wait(a, b))
                .collect();
            let result: Vec<(usize, usize)> = stage_edges(&streams, &order(count), &waits)
                .into_iter()
                .map(|(a, b)| (a.0, b.0))
                .collect();
            let mut all: Vec<(usize, usize)> = waits.iter().map(|w| (w.from.0, w.to.0)).collect();
            for (later, stream) in streams.iter().enumerate() {
                if let Some(earlier) = (0..later).rev().find(|&e| streams[e] == *stream) {
                    all.push((earlier, later));
                }
            }
            proptest::prop_assert_eq!(closure(count, &result), closure(count, &all));
            for (index, edge) in result.iter().enumerate() {
                let others: Vec<(usize, usize)> = result
                    .iter()
                    .enumerate()
                    .filter(|&(other, _)| other != index)
                    .map(|(_, e)| *e)
                    .collect();
                proptest::prop_assert!(!closure(count, &others).contains(edge), "{:?} is implied", edge);
            }
        }
    }
}
