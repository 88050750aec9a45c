//! Property tests of the ordering on random stage sets, checked against a brute-force
//! reference, and of the whole front end on mutated inputs (it must never panic).

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::lower::{Access, Cycle, Hazard, Mode, Node, Reason, Via, schedule};
use gpu_pipeline_schedule::Extent;

/// A random step: 1 to 4 streams, 1 to 10 stages, each touching some of 1 to 5 buffers (the
/// whole buffer, or with probability 1/2 a range of its first 8 elements, maybe empty) and
/// naming up to two other stages (earlier or later, each with probability 1/5) in `after`.
fn steps() -> impl Strategy<Value = (usize, Vec<Node>)> {
    (1usize..=4, 1usize..=5, 1usize..=10).prop_flat_map(|(streams, buffers, stages)| {
        let node = (
            0..streams,
            prop::collection::vec((0u8..3, prop::option::of((0u64..8, 0u64..4))), buffers),
            prop::collection::vec(prop::option::weighted(0.2, 0..stages), 2),
        );
        (Just(streams), prop::collection::vec(node, stages)).prop_map(|(streams, raw)| {
            let nodes = raw
                .into_iter()
                .enumerate()
                .map(|(index, (stream, modes, after))| Node {
                    stream: StreamId(stream),
                    accesses: modes
                        .iter()
                        .enumerate()
                        .filter_map(|(buffer, &(mode, range))| {
                            let mode = match mode {
                                1 => Mode::Read,
                                2 => Mode::Write,
                                _ => return None,
                            };
                            Some(Access {
                                buffer: BufferId(buffer),
                                mode,
                                extent: range.map(|(start, len)| {
                                    Extent::new(start, (start + len).min(RANGE_UNIVERSE))
                                }),
                            })
                        })
                        .collect(),
                    after: after
                        .into_iter()
                        .flatten()
                        .filter(|&other| other != index)
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .map(StageId)
                        .collect(),
                })
                .collect();
            (streams, nodes)
        })
    })
}

/// The elements a range may name: a whole-buffer access touches all of them.
const RANGE_UNIVERSE: u64 = 8;

/// The elements an access touches, listed one by one.
fn elements(access: &Access) -> Vec<u64> {
    match access.extent {
        Some(extent) => (extent.start..extent.end).collect(),
        None => (0..RANGE_UNIVERSE).collect(),
    }
}

/// Whether two stages touch a common element of a buffer where either writes, by brute force
/// over the elements.
fn conflict(a: &Node, b: &Node) -> bool {
    a.accesses.iter().any(|x| {
        b.accesses.iter().any(|y| {
            x.buffer == y.buffer
                && (x.mode == Mode::Write || y.mode == Mode::Write)
                && elements(x).iter().any(|e| elements(y).contains(e))
        })
    })
}

/// Every ordering the step must have, as `(earlier, later)`.
fn required(nodes: &[Node]) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for j in 0..nodes.len() {
        for i in 0..j {
            if nodes[i].stream != nodes[j].stream && conflict(&nodes[i], &nodes[j]) {
                pairs.push((i, j));
            }
        }
        pairs.extend(nodes[j].after.iter().map(|a| (a.0, j)));
    }
    pairs
}

/// Successor lists of stream order plus `edges`, over `extra` additional nodes.
fn adjacency(nodes: &[Node], edges: &[(usize, usize)], extra: usize) -> Vec<Vec<usize>> {
    let mut next = vec![Vec::new(); nodes.len() + extra];
    for i in 0..nodes.len() {
        if let Some(j) = (i + 1..nodes.len()).find(|&j| nodes[j].stream == nodes[i].stream) {
            next[i].push(j);
        }
    }
    for &(from, to) in edges {
        next[from].push(to);
    }
    next
}

fn reaches(next: &[Vec<usize>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; next.len()];
    let mut stack = vec![from];
    while let Some(node) = stack.pop() {
        for &succ in &next[node] {
            if succ == to {
                return true;
            }
            if !seen[succ] {
                seen[succ] = true;
                stack.push(succ);
            }
        }
    }
    false
}

/// Property (a): every required pair is ordered by `edges` plus stream order.
fn orders_everything(nodes: &[Node], edges: &[(usize, usize)]) -> bool {
    let next = adjacency(nodes, edges, 0);
    required(nodes)
        .iter()
        .all(|&(from, to)| reaches(&next, from, to))
}

/// Property (c): with START = n and END = n + 1 on the origin, every stream's first stage
/// runs after START and its last before END.
fn fork_join_holds(
    nodes: &[Node],
    edges: &[(usize, usize)],
    fork: &[usize],
    join: &[usize],
) -> bool {
    let n = nodes.len();
    let (start, end) = (n, n + 1);
    let mut next = adjacency(nodes, edges, 2);
    let on = |stream: usize| (0..n).filter(move |&i| nodes[i].stream.0 == stream);
    match (on(0).next(), on(0).next_back()) {
        (Some(first), Some(last)) => {
            next[start].push(first);
            next[last].push(end);
        }
        _ => next[start].push(end),
    }
    for &stream in fork {
        if let Some(first) = on(stream).next() {
            next[start].push(first);
        }
    }
    for &stream in join {
        if let Some(last) = on(stream).next_back() {
            next[last].push(end);
        }
    }
    let streams: BTreeSet<usize> = nodes.iter().map(|node| node.stream.0).collect();
    streams.into_iter().all(|stream| {
        let first = on(stream).next().unwrap_or(start);
        let last = on(stream).next_back().unwrap_or(end);
        (first == start || reaches(&next, start, first))
            && (last == end || reaches(&next, last, end))
    })
}

/// Checks that a reported cycle is real: its path runs from the stage to the stage it names in
/// `after`, through orderings that exist.
fn cycle_is_real(nodes: &[Node], cycle: &Cycle) -> bool {
    let Some(named) = nodes[cycle.stage.0].after.get(cycle.after) else {
        return false;
    };
    let mut at = cycle.stage;
    for hop in &cycle.path {
        let (from, to) = (&nodes[hop.from.0], &nodes[hop.to.0]);
        let valid = hop.from == at
            && match hop.via {
                Via::Stream(stream) => {
                    from.stream == stream && to.stream == stream && hop.from < hop.to
                }
                Via::Dependency(Reason::After) => to.after.contains(&hop.from),
                Via::Dependency(Reason::Hazard { buffer, hazard }) => {
                    let mode = |node: &Node| {
                        node.accesses
                            .iter()
                            .find(|a| a.buffer == buffer)
                            .map(|a| a.mode)
                    };
                    let expected = match hazard {
                        Hazard::ReadAfterWrite => (Some(Mode::Write), Some(Mode::Read)),
                        Hazard::WriteAfterRead => (Some(Mode::Read), Some(Mode::Write)),
                        Hazard::WriteAfterWrite => (Some(Mode::Write), Some(Mode::Write)),
                    };
                    hop.from < hop.to
                        && from.stream != to.stream
                        && (mode(from), mode(to)) == expected
                }
            };
        if !valid {
            return false;
        }
        at = hop.to;
    }
    at == *named && named.0 > cycle.stage.0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn the_schedule_is_complete_minimal_and_fork_joined((streams, nodes) in steps()) {
        let schedule = match schedule(streams, &nodes) {
            Ok(schedule) => schedule,
            Err(cycles) => {
                prop_assert!(!cycles.is_empty());
                for cycle in &cycles {
                    prop_assert!(cycle_is_real(&nodes, cycle), "{cycle:?}");
                }
                // Without `after`s that name later stages there is never a cycle.
                let forward: Vec<Node> = nodes
                    .iter()
                    .enumerate()
                    .map(|(i, node)| Node {
                        after: node.after.iter().copied().filter(|a| a.0 < i).collect(),
                        ..node.clone()
                    })
                    .collect();
                prop_assert!(schedule(streams, &forward).is_ok());
                return Ok(());
            }
        };
        let edges: Vec<(usize, usize)> =
            schedule.edges.iter().map(|edge| (edge.from.0, edge.to.0)).collect();

        // Waits are cross-stream and among the dependencies.
        for edge in &schedule.edges {
            prop_assert_ne!(nodes[edge.from.0].stream, nodes[edge.to.0].stream);
            prop_assert!(schedule.dependencies.contains(edge));
        }
        // (a) Every conflicting cross-stream pair and every `after` is ordered.
        prop_assert!(orders_everything(&nodes, &edges));
        // (b) No wait is redundant: dropping any one breaks (a).
        for skip in 0..edges.len() {
            let fewer: Vec<_> = edges.iter().enumerate().filter(|&(i, _)| i != skip).map(|(_, &e)| e).collect();
            prop_assert!(!orders_everything(&nodes, &fewer), "redundant wait {:?}", edges[skip]);
        }
        // (c) The step is a fork–join region on the origin, with minimal forks and joins.
        let fork: Vec<usize> = schedule.fork.iter().map(|s| s.0).collect();
        let join: Vec<usize> = schedule.join.iter().map(|s| s.0).collect();
        prop_assert!(!fork.contains(&0) && !join.contains(&0));
        prop_assert!(fork_join_holds(&nodes, &edges, &fork, &join));
        for skip in 0..fork.len() {
            let fewer: Vec<usize> = fork.iter().enumerate().filter(|&(i, _)| i != skip).map(|(_, &s)| s).collect();
            prop_assert!(!fork_join_holds(&nodes, &edges, &fewer, &join), "redundant fork");
        }
        for skip in 0..join.len() {
            let fewer: Vec<usize> = join.iter().enumerate().filter(|&(i, _)| i != skip).map(|(_, &s)| s).collect();
            prop_assert!(!fork_join_holds(&nodes, &edges, &fork, &fewer), "redundant join");
        }
        // Events: the sources of waits and the last stages of joined streams, nothing else.
        let mut events: BTreeSet<usize> = edges.iter().map(|&(from, _)| from).collect();
        events.extend(join.iter().filter_map(|&s| (0..nodes.len()).rev().find(|&i| nodes[i].stream.0 == s)));
        let reported: Vec<usize> = schedule.events.iter().map(|e| e.0).collect();
        prop_assert_eq!(reported, events.into_iter().collect::<Vec<_>>());
        // The enqueue order is a permutation that respects stream order and every wait.
        let mut position = vec![usize::MAX; nodes.len()];
        for (place, stage) in schedule.order.iter().enumerate() {
            position[stage.0] = place;
        }
        prop_assert!(position.iter().all(|&p| p != usize::MAX));
        let next = adjacency(&nodes, &edges, 0);
        for (from, successors) in next.iter().enumerate() {
            for &to in successors {
                prop_assert!(position[from] < position[to]);
            }
        }
    }

    #[test]
    fn mutated_inputs_never_panic(edits in prop::collection::vec((0usize..400, 0usize..VOCABULARY.len(), 0u8..3), 1..6)) {
        let mut words: Vec<String> = SEED.split_whitespace().map(str::to_owned).collect();
        for (at, word, kind) in edits {
            let at = at % words.len();
            // Delimiters stay put so the input still lexes and reaches the parser and checks.
            if words[at].contains(['(', ')', '{', '}', '[', ']']) {
                continue;
            }
            match kind {
                0 => words[at] = VOCABULARY[word].to_owned(),
                1 => { words.remove(at); }
                _ => words.insert(at, VOCABULARY[word].to_owned()),
            }
        }
        if let Ok(input) = parse(&words.join(" ")) {
            let _ = crate::analyse(&input).map(|pipeline| pipeline.dot());
        }
    }
}

/// A valid pipeline touching most of the grammar, spaced so that each word is one token.
const SEED: &str = r#"
pipeline P {
    streams { s1 ( priority = high ) , s2 ( non_blocking ) , s3 }
    unsafe kernels k = ptx ( "k" ) {
        fn scale ( n : u32 , src : & [ f32 ; unbounded] , dst : & mut [ f32 ; unbounded] ) host = crate :: h ;
    }
    params { n : u32 , a : & mut DeviceBuffer < f32 > , b : & mut DeviceBuffer < f32 > ,
             h : & mut PinnedBuffer < f32 > , f : & mut FlagCell }
    scratch { t : DeviceBuffer < f32 > = n as usize }
    stage x on s1 { launch k :: scale ( n , a , b ) grid n block 256 ; }
    stage y on s2 after x { copy b -> h ; wait f == 1 ; }
    stage z on s3 { fill t = 0 ; call g ( t ) writes ( t ) ; }
    stage w on s1 after z { host || { } reads ( h ) ; write f = 2 ; }
    concurrent ( y , z ) ;
}
"#;

/// Words a mutation may insert: keywords, names declared in `SEED`, and punctuation.
const VOCABULARY: &[&str] = &[
    "pipeline",
    "streams",
    "kernels",
    "params",
    "scratch",
    "stage",
    "concurrent",
    "on",
    "after",
    "launch",
    "grid",
    "block",
    "shared",
    "copy",
    "fill",
    "wait",
    "write",
    "host",
    "call",
    "reads",
    "writes",
    "synchronize",
    "alloc",
    "x",
    "y",
    "z",
    "w",
    "s1",
    "s2",
    "s3",
    "a",
    "b",
    "h",
    "f",
    "t",
    "n",
    "k",
    "scale",
    "u32",
    "f32",
    "&",
    "mut",
    ",",
    ";",
    ":",
    "::",
    "=",
    "==",
    "->",
    "1",
    "-1",
    "priority",
    "high",
    "non_blocking",
    "DeviceBuffer",
    "PinnedBuffer",
    "FlagCell",
    "Vec",
    "<",
    ">",
    "fn",
];
