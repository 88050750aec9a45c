//! Graphs: captured work as a DAG, and its executable form that streams replay.
//!
//! A replay runs the nodes one after another, in capture order, on the launching stream's
//! worker. Capture order is a topological order (a node only depends on nodes captured before
//! it), so this respects every dependency; running serially trades the graph's concurrency for
//! a replay that costs one queue item. The race detector still checks the graph as the GPU
//! would run it: two conflicting nodes with no path between them are a race.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::stream::LaunchEnd;

use super::condition::Condition;
use super::memory::{Held, Memory};
use super::op::{
    Keep, KernelArgValue, KernelFn, KernelTag, LaunchHook, NodeKind, OnLaunch, Op, OpWork, Work,
    effective_accesses, run_guarded,
};
use crate::vocab::access::{BufferId, Touch};
pub(crate) use crate::vocab::condition::Form;
use crate::vocab::fault::OpFailure;
use crate::vocab::fault::{CpuFault, Hazard};

/// What a node runs.
#[derive(Clone)]
pub(super) enum NodeWork {
    Host(Work),
    Kernel {
        func: KernelFn,
        args: Arc<[KernelArgValue]>,
    },
    /// Nothing: a join point of a built graph.
    Empty,
    /// A child graph's nodes, run in order.
    Child(Arc<Graph>),
    /// A `while` or `if` with its body.
    Conditional(Box<Conditional>),
}

/// One node of a captured graph.
#[derive(Clone)]
pub(crate) struct Node {
    pub(super) label: Arc<str>,
    pub(super) captured_on: Arc<str>,
    /// Indices of the nodes this one runs after; always smaller than its own index.
    pub(super) dependencies: Vec<usize>,
    pub(super) declared: Vec<Touch>,
    pub(super) work: NodeWork,
    pub(super) kind: NodeKind,
    pub(super) kernel: Option<KernelTag>,
    pub(super) host_function: bool,
    /// What the captured operation kept alive ([`Op::keep`]).
    pub(super) keep: Arc<[Keep]>,
    /// The pipeline stage that captured it, which its failure names.
    pub(super) stage: Option<&'static str>,
}

impl Node {
    /// The node for a captured operation; `None` for one-shot work, which cannot be replayed.
    pub(super) fn from_op(op: Op, captured_on: Arc<str>) -> Option<Self> {
        let work = match op.work {
            OpWork::Replayable(work) => NodeWork::Host(work),
            OpWork::Kernel { func, args } => NodeWork::Kernel {
                func,
                args: args.into(),
            },
            OpWork::Once(_) => return None,
        };
        Some(Node {
            label: Arc::from(op.label.as_ref()),
            captured_on,
            dependencies: Vec::new(),
            declared: op.accesses,
            work,
            kind: op.kind,
            kernel: op.kernel,
            host_function: op.host_function,
            keep: op.keep.into(),
            stage: op.stage,
        })
    }

    /// The captured operation's label.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// The stream the operation was captured on.
    #[cfg(test)]
    pub(crate) fn captured_on(&self) -> &str {
        &self.captured_on
    }

    /// Indices of the nodes this one depends on.
    #[cfg(test)]
    pub(crate) fn dependencies(&self) -> &[usize] {
        &self.dependencies
    }

    /// Whether this is a kernel node (whose arguments can be set).
    pub(crate) fn is_kernel(&self) -> bool {
        matches!(self.work, NodeWork::Kernel { .. })
    }

    /// A kernel node's current arguments.
    pub(crate) fn kernel_args(&self) -> Option<&[KernelArgValue]> {
        match &self.work {
            NodeWork::Kernel { args, .. } => Some(args),
            _ => None,
        }
    }

    /// What the captured operation keeps alive ([`Op::keep`]), in the order kept.
    pub(crate) fn keep(&self) -> &[Keep] {
        &self.keep
    }

    /// What kind of node it is.
    pub(crate) fn kind(&self) -> NodeKind {
        self.kind
    }

    /// Which kernel a kernel node launches, and how.
    pub(crate) fn kernel_tag(&self) -> Option<KernelTag> {
        self.kernel
    }

    /// The buffers the node touches: declared ones plus kernel buffer arguments.
    pub(crate) fn accesses(&self) -> Vec<Touch> {
        effective_accesses(&self.declared, self.kernel_args().unwrap_or(&[]))
    }

    pub(super) fn run(&self) -> Result<(), OpFailure> {
        match &self.work {
            NodeWork::Host(work) => run_guarded(|| work()),
            NodeWork::Kernel { func, args } => run_guarded(|| match &self.kernel {
                Some(tag) => func(&tag.config, args),
                // `Node::from_op` and the graph builder keep the kernel's tag.
                None => Err("a kernel node without its launch geometry".to_owned()),
            }),
            NodeWork::Empty => Ok(()),
            NodeWork::Child(graph) => graph.run_in_order(),
            NodeWork::Conditional(conditional) => conditional.run(),
        }
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("label", &self.label)
            .field("captured_on", &self.captured_on)
            .field("dependencies", &self.dependencies)
            .field("accesses", &self.accesses())
            .field("kernel_args", &self.kernel_args())
            .finish()
    }
}

/// A conditional node: its condition, its bodies and its state word.
#[derive(Clone, Debug)]
pub(crate) struct Conditional {
    pub(super) form: Form,
    pub(super) condition: Condition,
    pub(super) max_iterations: u32,
    /// Low half: iterations of the last run; high half: set when a run stopped at the
    /// maximum, until the host clears it.
    pub(super) state: Arc<AtomicU64>,
    pub(super) bodies: Vec<Graph>,
}

impl Conditional {
    /// One execution: the body while (or if) the condition holds, counting iterations in the
    /// state word; a loop stops after `max_iterations` with the condition still holding,
    /// marking the word. An `if`/`else` runs one of its bodies, a switch the body its value
    /// names (none when the value is out of range).
    pub(super) fn run(&self) -> Result<(), OpFailure> {
        let value = |c: &Condition| c.value().map_err(OpFailure::Failed);
        let body = |n: usize| self.bodies.get(n).map_or(Ok(()), Graph::run_in_order);
        match self.form {
            Form::If | Form::IfElse | Form::Switch => {
                let v = value(&self.condition)?;
                let pick = match self.form {
                    Form::Switch => v as usize,
                    _ if v != 0 => 0,
                    Form::IfElse => 1,
                    _ => return Ok(()),
                };
                body(pick)
            }
            Form::PingPong | Form::DoPingPong => {
                let mut done = 0u32;
                let mut test = self.form == Form::PingPong;
                let stopped = loop {
                    let mut go = !test || value(&self.condition)? != 0;
                    test = true;
                    let mut hit = false;
                    if go && done >= self.max_iterations {
                        (go, hit) = (false, true);
                    }
                    let sticky = self.state.load(Ordering::Acquire) >> 32;
                    let word = u64::from(done) | ((sticky | u64::from(hit)) << 32);
                    self.state.store(word, Ordering::Release);
                    if !go {
                        break hit;
                    }
                    body((done % 2) as usize)?;
                    done += 1;
                };
                // A run stopped at its maximum gets no fix-up (an eager step's error returns
                // before it too).
                if done % 2 == 1 && !stopped {
                    body(2)?;
                }
                Ok(())
            }
            Form::While | Form::DoWhile => {
                let mut done = 0u32;
                let mut test = self.form == Form::While;
                loop {
                    let mut go = !test || value(&self.condition)? != 0;
                    test = true;
                    let mut hit = false;
                    if go && done >= self.max_iterations {
                        (go, hit) = (false, true);
                    }
                    let sticky = self.state.load(Ordering::Acquire) >> 32;
                    let word = u64::from(done) | ((sticky | u64::from(hit)) << 32);
                    self.state.store(word, Ordering::Release);
                    if !go {
                        return Ok(());
                    }
                    body(0)?;
                    done += 1;
                }
            }
        }
    }
}

/// A captured (or built) DAG of operations, in a topological order (capture order; a built
/// graph only takes edges from earlier nodes to later ones).
#[derive(Clone, Debug, Default)]
pub(crate) struct Graph {
    pub(super) nodes: Vec<Node>,
}

impl Graph {
    pub(super) fn from_nodes(nodes: Vec<Node>) -> Self {
        Graph { nodes }
    }

    /// How many nodes the graph has.
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes; each depends only on nodes before it.
    pub(crate) fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Runs every node in order (a child graph or a conditional body): the first failure
    /// stops the run, and names the node that failed (the innermost, in nested bodies), not
    /// the conditional node or child graph around it.
    pub(super) fn run_in_order(&self) -> Result<(), OpFailure> {
        self.nodes.iter().try_for_each(|node| {
            node.run().map_err(|failure| match failure {
                within @ OpFailure::Within { .. } => within,
                failure => OpFailure::Within {
                    label: node.label.clone(),
                    stage: node.stage,
                    host_function: node.host_function,
                    failure: Box::new(failure),
                },
            })
        })
    }

    /// An executable copy that can be launched and updated independently of this graph.
    pub(crate) fn instantiate(&self) -> GraphExec {
        GraphExec {
            plan: Arc::new(ExecPlan::new(self.nodes.iter().cloned().map(ExecNode::new))),
            last_launch: Mutex::new(None),
        }
    }

    /// The graph in Graphviz DOT syntax, one box per node labelled with its stream.
    pub(crate) fn to_dot(&self) -> String {
        let mut dot = String::from("digraph capture {\n");
        for (i, node) in self.nodes.iter().enumerate() {
            let label = format!("{}\\n({})", escape(&node.label), escape(&node.captured_on));
            let _ = writeln!(dot, "    n{i} [shape=box, label=\"{label}\"];");
            for dep in &node.dependencies {
                let _ = writeln!(dot, "    n{dep} -> n{i};");
            }
        }
        dot.push_str("}\n");
        dot
    }
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A node ready to replay, with its effective accesses computed once.
#[derive(Debug)]
pub(super) struct ExecNode {
    pub(super) node: Node,
    pub(super) accesses: Vec<Touch>,
}

impl ExecNode {
    fn new(node: Node) -> Self {
        let accesses = node.accesses();
        ExecNode { node, accesses }
    }

    /// Runs the node's work.
    pub(super) fn run(&self) -> Result<(), OpFailure> {
        self.node.run()
    }
}

/// Two nodes of one graph (or of one body of a conditional node, or of a child graph) that
/// conflict and have no path between them.
#[derive(Clone, Debug)]
pub(super) struct IntraRace {
    pub(super) buffer: BufferId,
    pub(super) hazard: Hazard,
    /// Each node's label and the stream it was captured on.
    pub(super) earlier: (Arc<str>, Arc<str>),
    pub(super) later: (Arc<str>, Arc<str>),
}

/// An immutable snapshot that launches share; updates build a new one, so a replay already
/// queued keeps the arguments it was launched with (as CUDA's graph exec updates do).
#[derive(Debug)]
pub(super) struct ExecPlan {
    pub(super) nodes: Vec<Arc<ExecNode>>,
    /// Every allocation the nodes touch, once each: what a launch counts as pending.
    pub(super) memories: Vec<Arc<Memory>>,
    /// What each launch does as it is enqueued, in node order (see [`OnLaunch`]).
    pub(super) on_launch: Vec<Arc<dyn LaunchHook>>,
    intra: OnceLock<Vec<IntraRace>>,
    /// Whether a checked launch already reported the intra-graph races (once per snapshot).
    pub(super) intra_reported: AtomicBool,
}

impl ExecPlan {
    fn new(nodes: impl IntoIterator<Item = ExecNode>) -> Self {
        let nodes: Vec<Arc<ExecNode>> = nodes.into_iter().map(Arc::new).collect();
        ExecPlan {
            memories: memories_of(&nodes),
            on_launch: on_launch_of(&nodes),
            nodes,
            intra: OnceLock::new(),
            intra_reported: AtomicBool::new(false),
        }
    }

    /// Conflicting node pairs with no dependency path, computed on first use (checked mode).
    pub(super) fn intra_races(&self) -> &[IntraRace] {
        self.intra.get_or_init(|| find_intra_races(&self.nodes))
    }
}

fn find_intra_races(nodes: &[Arc<ExecNode>]) -> Vec<IntraRace> {
    let mut races = Vec::new();
    let top: Vec<(&Node, &[Touch])> = nodes
        .iter()
        .map(|n| (&n.node, n.accesses.as_slice()))
        .collect();
    races_among(&top, &mut races);
    for node in nodes {
        races_in_bodies(&node.node, &mut races);
    }
    races
}

/// The races among the nodes of each graph `node` holds (a child graph, the bodies of a
/// conditional node), at any depth. A body runs as a whole per iteration, so only its own
/// unordered nodes race with each other.
fn races_in_bodies(node: &Node, races: &mut Vec<IntraRace>) {
    let bodies: &[Graph] = match &node.work {
        NodeWork::Child(graph) => std::slice::from_ref(&**graph),
        NodeWork::Conditional(c) => &c.bodies,
        _ => return,
    };
    for body in bodies {
        let accesses: Vec<Vec<Touch>> = body.nodes.iter().map(Node::accesses).collect();
        let nodes: Vec<(&Node, &[Touch])> = body
            .nodes
            .iter()
            .zip(&accesses)
            .map(|(n, a)| (n, a.as_slice()))
            .collect();
        races_among(&nodes, races);
        for inner in &body.nodes {
            races_in_bodies(inner, races);
        }
    }
}

/// Conflicting pairs among `nodes` (one graph's, with their accesses) that no dependency
/// path orders.
fn races_among(nodes: &[(&Node, &[Touch])], races: &mut Vec<IntraRace>) {
    // ancestors[i] is a bitset of every node that node i transitively depends on.
    let words = nodes.len().div_ceil(64);
    let mut ancestors: Vec<Vec<u64>> = Vec::with_capacity(nodes.len());
    for (node, _) in nodes {
        let mut set = vec![0u64; words];
        for &dep in &node.dependencies {
            if let Some(dep_set) = ancestors.get(dep) {
                for (word, dep_word) in set.iter_mut().zip(dep_set) {
                    *word |= dep_word;
                }
                set[dep / 64] |= 1 << (dep % 64);
            }
        }
        ancestors.push(set);
    }
    let site = |node: &Node| (node.label.clone(), node.captured_on.clone());
    for later in 0..nodes.len() {
        for earlier in 0..later {
            if ancestors[later][earlier / 64] & (1 << (earlier % 64)) != 0 {
                continue;
            }
            for &(buffer, first, span) in nodes[earlier].1 {
                let hazard = nodes[later]
                    .1
                    .iter()
                    .filter(|(b, _, s)| *b == buffer && s.overlaps(span))
                    .find_map(|&(_, second, _)| Hazard::between(first, second));
                if let Some(hazard) = hazard {
                    races.push(IntraRace {
                        buffer,
                        hazard,
                        earlier: site(nodes[earlier].0),
                        later: site(nodes[later].0),
                    });
                }
            }
        }
    }
}

/// The launch hooks `nodes` keep, in node order.
fn on_launch_of(nodes: &[Arc<ExecNode>]) -> Vec<Arc<dyn LaunchHook>> {
    nodes
        .iter()
        .flat_map(|n| OnLaunch::of(&n.node.keep))
        .map(|hook| hook.0.clone())
        .collect()
}

/// Every allocation `nodes` keep, once each.
fn memories_of(nodes: &[Arc<ExecNode>]) -> Vec<Arc<Memory>> {
    let mut memories: Vec<Arc<Memory>> = Vec::new();
    for node in nodes {
        for memory in Op::memories(&node.node.keep) {
            if !memories.iter().any(|m| Arc::ptr_eq(m, memory)) {
                memories.push(memory.clone());
            }
        }
    }
    memories
}

/// An instantiated graph: launch it on any stream, set kernel node arguments, or update it
/// from a graph of the same shape.
#[derive(Debug)]
pub(crate) struct GraphExec {
    plan: Arc<ExecPlan>,
    /// Where the last launch that ran (not captured) ends: CUDA orders each launch of an
    /// executable graph behind its earlier launches, whatever streams they went to
    /// (`Stream::launch`).
    pub(super) last_launch: Mutex<Option<LaunchEnd>>,
}

impl GraphExec {
    /// How many nodes each launch runs.
    pub(crate) fn node_count(&self) -> usize {
        self.plan.nodes.len()
    }

    /// The plan a stream replays (see `Stream::launch`).
    pub(super) fn plan(&self) -> &Arc<ExecPlan> {
        &self.plan
    }

    /// The nodes of the current snapshot, in replay order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.plan.nodes.iter().map(|n| &n.node)
    }

    /// A kernel node's arguments as later launches will use them.
    #[cfg(test)]
    pub(crate) fn kernel_args(&self, index: usize) -> Option<&[KernelArgValue]> {
        self.plan.nodes.get(index)?.node.kernel_args()
    }

    /// Replaces a kernel node's arguments for later launches (CUDA's "exec kernel node set
    /// params"); launches already enqueued keep the old ones.
    pub(crate) fn set_kernel_args(
        &mut self,
        index: usize,
        args: Vec<KernelArgValue>,
        config: crate::launch::config::LaunchConfig,
    ) -> Result<(), CpuFault> {
        let count = self.plan.nodes.len();
        let old = self
            .plan
            .nodes
            .get(index)
            .ok_or(CpuFault::NodeOutOfRange { index, count })?;
        let NodeWork::Kernel { func, .. } = &old.node.work else {
            return Err(CpuFault::NotAKernelNode {
                index,
                label: old.node.label.clone(),
            });
        };
        let mut node = old.node.clone();
        // The node now also keeps the new arguments' memory (the old stays kept: launches
        // already enqueued may still use it).
        let mut keep = node.keep.to_vec();
        for arg in args.iter().filter_map(KernelArgValue::as_buffer) {
            if !keep
                .iter()
                .any(|k| k.key() == Arc::as_ptr(&arg.memory) as *const () as usize)
            {
                keep.push(Keep::Memory(Held::new(arg.memory.clone())));
            }
        }
        node.keep = keep.into();
        if let Some(tag) = &mut node.kernel {
            tag.config = config;
        }
        node.work = NodeWork::Kernel {
            func: func.clone(),
            args: args.into(),
        };
        let node = ExecNode::new(node);
        // New buffers mean new potential races; the same buffers keep what was found.
        let same_accesses = node.accesses == old.accesses;
        let mut nodes = self.plan.nodes.clone();
        nodes[index] = Arc::new(node);
        let plan = ExecPlan {
            memories: memories_of(&nodes),
            on_launch: on_launch_of(&nodes),
            nodes,
            intra: if same_accesses {
                self.plan.intra.clone()
            } else {
                OnceLock::new()
            },
            intra_reported: AtomicBool::new(
                same_accesses && self.plan.intra_reported.load(Ordering::Relaxed),
            ),
        };
        self.plan = Arc::new(plan);
        Ok(())
    }

    /// Takes every node's work, arguments and accesses from `graph`, which must have the same
    /// topology (node count, dependencies, and kind of each node).
    pub(crate) fn update(&mut self, graph: &Graph) -> Result<(), CpuFault> {
        let mismatch = |reason: String| CpuFault::GraphTopologyMismatch { reason };
        let (old, new) = (&self.plan.nodes, graph.nodes());
        if old.len() != new.len() {
            return Err(mismatch(format!(
                "it has {} nodes and the new graph has {}",
                old.len(),
                new.len()
            )));
        }
        for (index, (old, new)) in old.iter().zip(new).enumerate() {
            if old.node.dependencies != new.dependencies {
                return Err(mismatch(format!(
                    "node {index} (`{}`) depends on {:?} but in the new graph on {:?}",
                    new.label, old.node.dependencies, new.dependencies
                )));
            }
            if old.node.is_kernel() != new.is_kernel() {
                return Err(mismatch(format!(
                    "node {index} (`{}`) changes between kernel and host work",
                    new.label
                )));
            }
            inner_shape(&format!("node {index} (`{}`)", new.label), &old.node, new)
                .map_err(mismatch)?;
        }
        self.plan = Arc::new(ExecPlan::new(new.iter().cloned().map(ExecNode::new)));
        Ok(())
    }
}

/// `Err` says where the nodes inside `old` and `new` (a conditional node's bodies, a child
/// graph's nodes) differ in shape: their count, form, dependencies, kind or kernels, as
/// `cuGraphExecUpdate` refuses a body or child graph of another topology. `at` names the
/// node for the message.
fn inner_shape(at: &str, old: &Node, new: &Node) -> Result<(), String> {
    let (old_graphs, new_graphs): (Vec<&Graph>, Vec<&Graph>) = match (&old.work, &new.work) {
        (NodeWork::Conditional(a), NodeWork::Conditional(b)) => {
            if a.form != b.form || a.bodies.len() != b.bodies.len() {
                return Err(format!("{at} is another kind of conditional node"));
            }
            (a.bodies.iter().collect(), b.bodies.iter().collect())
        }
        (NodeWork::Child(a), NodeWork::Child(b)) => (vec![&**a], vec![&**b]),
        _ => return Ok(()),
    };
    for (body, (a, b)) in old_graphs.into_iter().zip(new_graphs).enumerate() {
        if a.nodes.len() != b.nodes.len() {
            return Err(format!(
                "{at}: its body {body} has {} nodes and the new graph's has {}",
                a.nodes.len(),
                b.nodes.len()
            ));
        }
        for (index, (x, y)) in a.nodes.iter().zip(&b.nodes).enumerate() {
            let here = format!("{at}: node {index} (`{}`) of its body {body}", y.label);
            let kernel = |n: &Node| n.kernel.as_ref().map(|tag| tag.kernel);
            if x.dependencies != y.dependencies || x.kind != y.kind || kernel(x) != kernel(y) {
                return Err(format!(
                    "{here} has other dependencies, another kind or another kernel"
                ));
            }
            inner_shape(&here, x, y)?;
        }
    }
    Ok(())
}
