//! The ordering of one step: which cross-stream waits the accesses and `after` clauses need,
//! their transitive reduction, an enqueue order, and the step's fork and join.
//!
//! It works on plain [`Node`]s, so the property tests drive it with random stage sets.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub usize);
    )*};
}

ids! {
    /// Index of a stream in declaration order. Stream 0 is the origin of every step.
    StreamId;
    /// Index of a stage, equal to its place in program order.
    StageId;
    /// Index of a buffer: buffer params, then scratch buffers, in declaration order.
    BufferId;
}

/// The first declared stream: every step starts and ends on it.
pub const ORIGIN: StreamId = StreamId(0);

/// How a stage uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// Read only.
    Read,
    /// Written (and maybe read).
    Write,
}

/// One buffer access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access {
    /// The buffer.
    pub buffer: BufferId,
    /// How.
    pub mode: Mode,
    /// The elements touched, or `None` for the whole buffer.
    pub extent: Option<Extent>,
}

impl Access {
    /// An access of the whole buffer.
    pub fn whole(buffer: BufferId, mode: Mode) -> Access {
        Access {
            buffer,
            mode,
            extent: None,
        }
    }

    /// Whether the two accesses may touch a common element of one buffer.
    pub fn overlaps(&self, other: &Access) -> bool {
        self.buffer == other.buffer
            && match (self.extent, other.extent) {
                (Some(a), Some(b)) => a.overlaps(b),
                (Some(a), None) | (None, Some(a)) => !a.is_empty(),
                (None, None) => true,
            }
    }
}

/// A half-open range of elements, `start..end`, of one buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Extent {
    /// The first element.
    pub start: u64,
    /// One past the last element.
    pub end: u64,
}

impl Extent {
    /// `start..end`.
    pub fn new(start: u64, end: u64) -> Extent {
        Extent { start, end }
    }

    /// Whether it holds no element.
    pub fn is_empty(self) -> bool {
        self.end <= self.start
    }

    /// Whether the two ranges share an element (an empty range shares none).
    pub fn overlaps(self, other: Extent) -> bool {
        !self.is_empty() && !other.is_empty() && self.start < other.end && other.start < self.end
    }
}

/// A cross-stream ordering: `to` waits for `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The earlier stage; it records the event.
    pub from: StageId,
    /// The later stage; its stream waits on the event.
    pub to: StageId,
    /// Why, in buffer order, `after` last.
    pub reasons: Vec<Reason>,
}

/// Why one stage must wait for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Both touch `buffer` and at least one writes it.
    Hazard {
        /// The buffer.
        buffer: BufferId,
        /// Which order of accesses.
        hazard: Hazard,
    },
    /// The later stage is declared `after` the earlier one.
    After,
}

/// The data hazard between an earlier and a later access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hazard {
    /// The later stage reads what the earlier one writes.
    ReadAfterWrite,
    /// The later stage writes what the earlier one reads.
    WriteAfterRead,
    /// Both write.
    WriteAfterWrite,
}

impl Hazard {
    /// The short name CUDA programmers use: `RAW`, `WAR`, `WAW`.
    pub fn abbreviation(self) -> &'static str {
        match self {
            Hazard::ReadAfterWrite => "RAW",
            Hazard::WriteAfterRead => "WAR",
            Hazard::WriteAfterWrite => "WAW",
        }
    }
}

/// One step of a path through the ordering, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// The earlier stage.
    pub from: StageId,
    /// The later stage.
    pub to: StageId,
    /// What orders them.
    pub via: Via,
}

/// What orders the two stages of a [`Hop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// They run one after the other on one stream.
    Stream(StreamId),
    /// A dependency.
    Dependency(Reason),
}

/// An `after` that would close a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The stage with the `after` clause.
    pub stage: StageId,
    /// Index of the offending name in that stage's `after` list.
    pub after: usize,
    /// How the named stage already runs after `stage`, from `stage` to the named one.
    pub path: Vec<Hop>,
}

/// One stage as the ordering sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The stream it runs on.
    pub stream: StreamId,
    /// The buffers it touches, each once.
    pub accesses: Vec<Access>,
    /// The stages it is declared `after`.
    pub after: Vec<StageId>,
}

/// The ordering of a step, as [`schedule`] computes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Every cross-stream ordering required, sorted by `(from, to)`.
    pub dependencies: Vec<Edge>,
    /// The transitive reduction of `dependencies` given stream order, sorted by `(from, to)`.
    pub edges: Vec<Edge>,
    /// A topological enqueue order, program order wherever that is free.
    pub order: Vec<StageId>,
    /// Stages that record an event, ascending.
    pub events: Vec<StageId>,
    /// Streams that wait on the origin's start-of-step event, ascending.
    pub fork: Vec<StreamId>,
    /// Streams whose last stage the origin waits for at the end of the step, ascending.
    pub join: Vec<StreamId>,
}

/// Orders the stages of one step.
///
/// Stages are in program order. For every pair `i < j` on different streams that touch a
/// common element of one buffer where either writes, `j` waits for `i`; `after` adds more such pairs. Stages on one
/// stream are ordered by the stream for free. Of the cross-stream pairs only the transitive
/// reduction is emitted: a wait is dropped when its target is reachable from its source through
/// other waits and stream order.
///
/// The step is a fork–join region on the origin (stream 0): every other stream's first stage
/// runs after the start of the step on the origin, and the origin's end runs after every other
/// stream's last stage. Each gets an explicit fork or join only where no other path implies it.
///
/// Fails with every `after` naming a later stage that closes a cycle.
pub fn schedule(stream_count: usize, nodes: &[Node]) -> Result<Schedule, Vec<Cycle>> {
    let streams: Vec<StreamId> = nodes.iter().map(|node| node.stream).collect();
    let mut required = hazards(nodes);
    // Forward `after`s first: like every hazard they point forward in program order, so the
    // graph stays acyclic. A same-stream one is already stream order.
    for (to, node) in nodes.iter().enumerate() {
        for &StageId(from) in &node.after {
            if from < to && streams[from] != node.stream {
                require(&mut required, from, to, Reason::After);
            }
        }
    }
    // An `after` naming a later stage points backwards; it is kept only if the named stage is
    // not already ordered after this one.
    let mut cycles = Vec::new();
    for (to, node) in nodes.iter().enumerate() {
        for (index, &StageId(from)) in node.after.iter().enumerate() {
            if from <= to || from >= nodes.len() {
                continue;
            }
            let edges = edges_of(&required);
            match path(&streams, &edges, StageId(to), StageId(from)) {
                Some(path) => cycles.push(Cycle {
                    stage: StageId(to),
                    after: index,
                    path,
                }),
                None => require(&mut required, from, to, Reason::After),
            }
        }
    }
    if !cycles.is_empty() {
        return Err(cycles);
    }

    let dependencies = edges_of(&required);
    let graph = Graph::new(&streams, &dependencies);
    let order = graph.topological_order();
    let reach = graph.reachability(&order);
    let edges: Vec<Edge> = dependencies
        .iter()
        .filter(|edge| !graph.redundant(edge, &reach))
        .cloned()
        .collect();

    let stream_count = streams
        .iter()
        .map(|stream| stream.0 + 1)
        .fold(stream_count, usize::max);
    let (fork, join) = fork_join(stream_count, &streams, &reach);
    let mut events: Vec<StageId> = edges.iter().map(|edge| edge.from).collect();
    events.extend(
        join.iter()
            .filter_map(|&stream| last_on(&streams, stream).map(StageId)),
    );
    events.sort();
    events.dedup();
    Ok(Schedule {
        dependencies,
        edges,
        order: order.into_iter().map(StageId).collect(),
        events,
        fork,
        join,
    })
}

/// A shortest path of orderings (stream order and `dependencies`) from `from` to `to`.
pub fn path(
    streams: &[StreamId],
    dependencies: &[Edge],
    from: StageId,
    to: StageId,
) -> Option<Vec<Hop>> {
    let graph = Graph::new(streams, dependencies);
    let n = streams.len();
    if from.0 >= n || to.0 >= n {
        return None;
    }
    let mut came_from: Vec<Option<(usize, Via)>> = vec![None; n];
    let mut queue = VecDeque::from([from.0]);
    while let Some(node) = queue.pop_front() {
        if node == to.0 {
            break;
        }
        for &(next, via) in &graph.successors[node] {
            if next != from.0 && came_from[next].is_none() {
                came_from[next] = Some((node, via));
                queue.push_back(next);
            }
        }
    }
    let mut hops = Vec::new();
    let mut node = to.0;
    while node != from.0 {
        let (previous, via) = came_from[node]?;
        hops.push(Hop {
            from: StageId(previous),
            to: StageId(node),
            via,
        });
        node = previous;
    }
    hops.reverse();
    Some(hops)
}

/// Every cross-stream pair `i < j` that touches a common element of a buffer where either
/// writes.
fn hazards(nodes: &[Node]) -> BTreeMap<(usize, usize), Vec<Reason>> {
    let mut required = BTreeMap::new();
    for (j, later) in nodes.iter().enumerate() {
        for (i, earlier) in nodes[..j].iter().enumerate() {
            if earlier.stream == later.stream {
                continue;
            }
            for first in &earlier.accesses {
                for second in later.accesses.iter().filter(|a| a.overlaps(first)) {
                    let hazard = match (first.mode, second.mode) {
                        (Mode::Read, Mode::Read) => continue,
                        (Mode::Write, Mode::Read) => Hazard::ReadAfterWrite,
                        (Mode::Read, Mode::Write) => Hazard::WriteAfterRead,
                        (Mode::Write, Mode::Write) => Hazard::WriteAfterWrite,
                    };
                    let reason = Reason::Hazard {
                        buffer: first.buffer,
                        hazard,
                    };
                    require(&mut required, i, j, reason);
                }
            }
        }
    }
    required
}

fn require(
    required: &mut BTreeMap<(usize, usize), Vec<Reason>>,
    from: usize,
    to: usize,
    reason: Reason,
) {
    let reasons = required.entry((from, to)).or_default();
    if !reasons.contains(&reason) {
        reasons.push(reason);
        // Buffer order, `after` last, so the result does not depend on access order.
        reasons.sort_by_key(|reason| match reason {
            Reason::Hazard { buffer, .. } => (0, buffer.0),
            Reason::After => (1, 0),
        });
    }
}

fn edges_of(required: &BTreeMap<(usize, usize), Vec<Reason>>) -> Vec<Edge> {
    required
        .iter()
        .map(|(&(from, to), reasons)| Edge {
            from: StageId(from),
            to: StageId(to),
            reasons: reasons.clone(),
        })
        .collect()
}

/// The stage on `stream` that comes first, or last, in program order.
fn first_on(streams: &[StreamId], stream: StreamId) -> Option<usize> {
    streams.iter().position(|&s| s == stream)
}

fn last_on(streams: &[StreamId], stream: StreamId) -> Option<usize> {
    streams.iter().rposition(|&s| s == stream)
}

/// The minimal fork and join sets. A stream needs a fork unless its first stage already runs
/// after some origin stage or after the first stage of another stream that is forked; it needs
/// a join unless its last stage already runs before some origin stage or before the last stage
/// of another stream that is joined.
fn fork_join(
    stream_count: usize,
    streams: &[StreamId],
    reach: &[BitSet],
) -> (Vec<StreamId>, Vec<StreamId>) {
    let others: Vec<StreamId> = (0..stream_count)
        .map(StreamId)
        .filter(|&s| s != ORIGIN)
        .collect();
    let reaches = |from: usize, to: usize| reach[from].contains(to);

    let origin_first = first_on(streams, ORIGIN);
    let unforked: Vec<(StreamId, usize)> = others
        .iter()
        .filter_map(|&stream| Some((stream, first_on(streams, stream)?)))
        .filter(|&(_, first)| origin_first.is_none_or(|origin| !reaches(origin, first)))
        .collect();
    // Among streams not reached from the origin, "reached from" is a partial order on first
    // stages (the graph is acyclic); its minimal elements are exactly the streams to fork.
    let fork = unforked
        .iter()
        .filter(|&&(_, first)| !unforked.iter().any(|&(_, other)| reaches(other, first)))
        .map(|&(stream, _)| stream)
        .collect();

    let origin_last = last_on(streams, ORIGIN);
    let unjoined: Vec<(StreamId, usize)> = others
        .iter()
        .filter_map(|&stream| Some((stream, last_on(streams, stream)?)))
        .filter(|&(_, last)| origin_last.is_none_or(|origin| !reaches(last, origin)))
        .collect();
    let join = unjoined
        .iter()
        .filter(|&&(_, last)| !unjoined.iter().any(|&(_, other)| reaches(last, other)))
        .map(|&(stream, _)| stream)
        .collect();
    (fork, join)
}

/// Stream order plus dependencies, as successor lists.
struct Graph {
    successors: Vec<Vec<(usize, Via)>>,
}

impl Graph {
    fn new(streams: &[StreamId], dependencies: &[Edge]) -> Self {
        let n = streams.len();
        let mut successors = vec![Vec::new(); n];
        for (from, &stream) in streams.iter().enumerate() {
            if let Some(offset) = streams[from + 1..].iter().position(|&s| s == stream) {
                successors[from].push((from + 1 + offset, Via::Stream(stream)));
            }
        }
        for edge in dependencies {
            let (from, to) = (edge.from.0, edge.to.0);
            if from < n && to < n {
                let reason = edge.reasons.first().copied().unwrap_or(Reason::After);
                successors[from].push((to, Via::Dependency(reason)));
            }
        }
        Graph { successors }
    }

    /// Kahn's algorithm, always taking the ready stage that comes first in program order.
    fn topological_order(&self) -> Vec<usize> {
        let n = self.successors.len();
        let mut incoming = vec![0usize; n];
        for successors in &self.successors {
            for &(to, _) in successors {
                incoming[to] += 1;
            }
        }
        let mut ready: BinaryHeap<Reverse<usize>> = (0..n)
            .filter(|&node| incoming[node] == 0)
            .map(Reverse)
            .collect();
        let mut order = Vec::with_capacity(n);
        while let Some(Reverse(node)) = ready.pop() {
            order.push(node);
            for &(to, _) in &self.successors[node] {
                incoming[to] -= 1;
                if incoming[to] == 0 {
                    ready.push(Reverse(to));
                }
            }
        }
        order
    }

    /// For every stage, the set of stages that run after it (itself excluded).
    fn reachability(&self, order: &[usize]) -> Vec<BitSet> {
        let n = self.successors.len();
        let mut reach = vec![BitSet::new(n); n];
        for &node in order.iter().rev() {
            let mut set = BitSet::new(n);
            for &(next, _) in &self.successors[node] {
                set.insert(next);
                set.union_with(&reach[next]);
            }
            reach[node] = set;
        }
        reach
    }

    /// Whether `edge.to` is reachable from `edge.from` without the edge itself: through some
    /// other successor of `edge.from`.
    fn redundant(&self, edge: &Edge, reach: &[BitSet]) -> bool {
        let (from, to) = (edge.from.0, edge.to.0);
        self.successors[from]
            .iter()
            .any(|&(next, _)| next != to && reach[next].contains(to))
    }
}

/// A fixed-size set of stage indices.
#[derive(Clone)]
struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    fn new(len: usize) -> Self {
        BitSet {
            words: vec![0; len.div_ceil(64)],
        }
    }

    fn insert(&mut self, index: usize) {
        if let Some(word) = self.words.get_mut(index / 64) {
            *word |= 1 << (index % 64);
        }
    }

    fn contains(&self, index: usize) -> bool {
        self.words
            .get(index / 64)
            .is_some_and(|word| word & (1 << (index % 64)) != 0)
    }

    fn union_with(&mut self, other: &BitSet) {
        for (word, other) in self.words.iter_mut().zip(&other.words) {
            *word |= other;
        }
    }
}
