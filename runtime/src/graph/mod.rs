//! Graphs: work recorded once (by stream capture, or node by node) and replayed many times
//! through an executable graph.
//!
//! Lifetimes: a [`Graph`] holds everything its nodes point at (device and pinned memory,
//! modules, host closures), and a [`GraphExec`] holds a copy of that list plus the graph
//! itself, so nothing a launch can touch is freed while the executable graph lives. Each
//! launch makes the host wait for it before it touches pinned memory the graph copies, and a
//! launch, which borrows nothing, refuses to run while a host slice
//! ([`HostView`](crate::HostView)) of pinned or managed memory it touches is alive. The
//! rules live with each backend (`cuda/graph.rs`; `cpu/graph.rs` and `cpu/memory.rs`).
//!
//! On the CPU backend a graph is the engine's recording: nodes are numbered in capture order,
//! kernel nodes are identified by the kernel they launch, an executable graph replays the
//! nodes in that order on the launching stream's worker, and kernel arguments are replaced in
//! place as on CUDA.
//!
//! Graphs can also be built node by node with explicit dependencies ([`Graph::new`] and the
//! `add_*_node` methods, `build.rs`), on both backends, including device-side `while` and
//! `if` nodes whose bodies are built the same way ([`GraphBody`], `control.rs`).

mod build;
mod capture;
mod control;
mod exec;
mod kernel_set;
mod updates;

use std::collections::HashSet;
use std::sync::Arc;

pub use build::{GraphBody, WhileNode};
pub use capture::{CaptureMode, CaptureStatus, exchange_thread_capture_mode};
pub use control::{Comparison, Condition, ConditionValue, LoopState};
use exec::{CpuExec, ExecBackend};
pub use exec::{GraphExec, GraphUpdate};
pub use kernel_set::{
    CONDITION_HEADER, ConditionBytes, ConditionHandle, ConditionSetter, HandleKind, SetsCondition,
};
pub use updates::KernelUpdates;

use crate::context::Context;
use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::launch::{KernelArgsFor, LaunchConfig, Signature, TypedKernel};
use crate::module::KernelBackend;
use crate::stream::{Stream, StreamBackend, mixed};
use crate::sys;

/// The verdict of a whole-graph update (`CUgraphExecUpdateResult`).
///
/// ```
/// use gpu_pipeline::{CaptureMode, Context, DeviceBuffer, GraphUpdateResult, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut x = DeviceBuffer::<u32>::alloc(&ctx, 8)?;
/// let one = stream.capture(CaptureMode::ThreadLocal, |s| s.memset_u32(&mut x, 1))?;
/// let mut exec = one.instantiate()?;
/// let two = stream.capture(CaptureMode::ThreadLocal, |s| {
///     s.memset_u32(&mut x, 2)?;
///     s.memset_u32(&mut x, 3)
/// })?;
/// let update = exec.try_update(&two)?;
/// assert_eq!(update.result, GraphUpdateResult::ERROR_TOPOLOGY_CHANGED);
/// assert_eq!(update.result.known_name(), Some("ERROR_TOPOLOGY_CHANGED"));
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub use crate::sys::CUgraphExecUpdateResult as GraphUpdateResult;
/// A node's kind (`CUgraphNodeType`).
///
/// ```
/// use gpu_pipeline::{CaptureMode, Context, DeviceBuffer, GraphNodeType, PinnedBuffer, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut x = DeviceBuffer::<u32>::alloc(&ctx, 8)?;
/// let mut out = PinnedBuffer::<u32>::zeros(&ctx, 8)?;
/// let graph = stream.capture(CaptureMode::ThreadLocal, |s| {
///     s.memset_u32(&mut x, 1)?;
///     s.copy_dtoh(&x, &mut out)
/// })?;
/// let kinds: Vec<GraphNodeType> = graph.nodes()?.iter().map(|node| node.kind()).collect();
/// assert_eq!(kinds, [GraphNodeType::MEMSET, GraphNodeType::MEMCPY]);
/// assert_eq!(format!("{:?}", kinds[1]), "MEMCPY");
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub use crate::sys::CUgraphNodeType as GraphNodeType;

/// A graph recorded by [`Stream::end_capture`](crate::Stream::end_capture) or
/// [`Stream::capture`](crate::Stream::capture), or built node by node from [`Graph::new`].
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{CaptureMode, Context, DeviceBuffer, PinnedBuffer, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::non_blocking(&ctx)?;
/// let input = PinnedBuffer::from_slice(&ctx, &[1.0f32; 4])?;
/// let mut field = DeviceBuffer::<f32>::alloc(&ctx, 4)?;
/// // Recorded once...
/// let graph = stream.capture(CaptureMode::ThreadLocal, |s| s.copy_htod(&input, &mut field))?;
/// let exec = graph.instantiate()?;
/// // ...replayed many times.
/// for _ in 0..3 {
///     exec.launch(&stream)?;
/// }
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
pub struct Graph {
    ctx: Context,
    backend: GraphBackend,
    /// Process-unique, so a node is never taken for one of another graph.
    id: u64,
    /// Where nodes go: scope 0 is the graph itself, each later one the body of a conditional
    /// node (`build.rs`).
    scopes: Vec<Scope>,
    /// The state of each `while` loop, which executable graphs check after their launches.
    loops: Vec<LoopState>,
    /// The executable graph alive of a graph with conditional nodes (CUDA allows one).
    instance: std::sync::Mutex<std::sync::Weak<()>>,
    /// Set when building a conditional body failed: a half-built loop could never end, so
    /// the graph refuses further nodes and instantiation.
    broken: bool,
}

/// One place nodes are added to: the graph, or a conditional body, as each backend names it.
#[derive(Clone, Debug)]
enum Scope {
    /// The index `cuda::Graph` gives the body (0: the graph).
    Cuda(usize),
    /// The path of conditional node indices from the top-level graph (empty: the graph).
    Cpu(Vec<usize>),
}

/// The one backend value a [`Graph`] holds. There is one per graph, so the CUDA variant's
/// size (its memo of checked buffers, `cuda::keep::Checked`) costs nothing that matters, and
/// boxing it would add a pointer to follow on every node a build adds.
#[allow(clippy::large_enum_variant)]
pub(crate) enum GraphBackend {
    /// A CUDA graph.
    Cuda(cuda::Graph),
    /// A CPU-backend recording.
    Cpu(cpu::Graph),
}

/// Where a node lives in its graph: a driver handle, or a position in capture order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum NodeId {
    Cuda(cuda::NodeRef),
    Cpu(usize),
}

/// One node of a [`Graph`]. A plain handle: it does not keep the graph alive, and calls that
/// take it check that it belongs to the graph they act on.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, Graph, GraphNodeType, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut a = DeviceBuffer::<u32>::alloc(&ctx, 8)?;
/// let mut b = DeviceBuffer::<u32>::alloc(&ctx, 8)?;
/// let mut graph = Graph::new(&ctx)?;
/// let clear_a = graph.add_memset_u32_node(&[], &mut a, 0)?;
/// let clear_b = graph.add_memset_u32_node(&[], &mut b, 0)?;
/// let both = graph.add_empty_node(&[clear_a, clear_b])?; // a join point
/// assert_eq!(clear_a.kind(), GraphNodeType::MEMSET);
/// assert_eq!(both.kind(), GraphNodeType::EMPTY);
/// assert_eq!(graph.node_count()?, 3);
/// assert_eq!(graph.edge_count()?, 2);
/// graph.instantiate()?.launch(&stream)?;
/// stream.synchronize()?;
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphNode {
    graph: u64,
    /// The scope (graph or conditional body) the node belongs to.
    scope: u32,
    kind: GraphNodeType,
    id: NodeId,
}

impl GraphNode {
    /// The node's kind.
    pub fn kind(&self) -> GraphNodeType {
        self.kind
    }

    /// The raw handle, valid while its graph lives; `None` on the CPU backend.
    pub fn handle(&self) -> Option<sys::CUgraphNode> {
        match self.id {
            NodeId::Cuda(node) => Some(node.raw()),
            NodeId::Cpu(_) => None,
        }
    }

    /// The node's position in capture order on the CPU backend (`None` on CUDA).
    pub fn cpu_index(&self) -> Option<usize> {
        match self.id {
            NodeId::Cpu(index) => Some(index),
            NodeId::Cuda(_) => None,
        }
    }

    /// [`GraphNode::cpu_index`] under the name of earlier versions.
    #[doc(hidden)]
    pub fn host_index(&self) -> Option<usize> {
        self.cpu_index()
    }
}

/// Which kernel a kernel node launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum KernelIdentity {
    /// The function.
    Cuda(cuda::FunctionId),
    /// The CPU-backend kernel's id.
    Cpu(u64),
}

/// A kernel node: which kernel it launches and how.
///
/// ```
/// use gpu_pipeline::{Context, CpuKernel, DeviceBuffer, Graph, LaunchConfig, Module, Stream};
/// fn fill_on_cpu(n: u32, y: &mut [f32]) {
///     y[..n as usize].fill(1.0);
/// }
/// let ctx = Context::cpu();
/// let ptx = ".version 8.0\n.target sm_75\n.address_size 64\n\
///            .visible .entry fill(.param .u32 n, .param .u64 y)\n{\n\tret;\n}\n";
/// let module = Module::load_ptx(&ctx, ptx)?;
/// // SAFETY: `fill(n, y)` writes `y[i]` for `i < n` only, and `n` is `y`'s length below.
/// let fill = unsafe { module.function("fill")?.typed::<(u32, &mut [f32])>()? }
///     .with_cpu(CpuKernel::new(fill_on_cpu));
/// let stream = Stream::new(&ctx)?;
/// let mut y = DeviceBuffer::<f32>::zeros(&stream, 64)?;
/// let mut graph = Graph::new(&ctx)?;
/// let config = LaunchConfig::for_elements(64, 32);
/// let node = graph.add_kernel_node(&[], &fill, config, (64u32, &mut y))?;
/// assert!(node.launches(&fill));
/// assert_eq!(node.config(), config);
/// assert_eq!(graph.kernel_nodes()?, [node]);
/// graph.instantiate()?.launch(&stream)?;
/// drop(graph); // the graph shares `y`; let it go before reading
/// assert_eq!(y.to_vec(&stream)?, vec![1.0; 64]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelNode {
    node: GraphNode,
    kernel: KernelIdentity,
    config: LaunchConfig,
}

impl KernelNode {
    /// The node.
    pub fn node(&self) -> GraphNode {
        self.node
    }

    /// The kernel's function handle: compare with [`Kernel::handle`](crate::Kernel::handle).
    /// `None` on the CPU backend (use [`KernelNode::launches`]).
    pub fn function(&self) -> Option<sys::CUfunction> {
        match self.kernel {
            KernelIdentity::Cuda(f) => Some(f.raw()),
            KernelIdentity::Cpu(_) => None,
        }
    }

    /// The grid, block and shared memory the node was recorded with.
    pub fn config(&self) -> LaunchConfig {
        self.config
    }

    /// Whether the node launches `kernel`.
    pub fn launches<Sig>(&self, kernel: &TypedKernel<Sig>) -> bool {
        let k = kernel.kernel();
        match (self.kernel, &k.inner.backend) {
            (KernelIdentity::Cuda(f), KernelBackend::Cuda(function)) => f == function.id(),
            (KernelIdentity::Cpu(id), KernelBackend::Cpu) => id == k.inner.id,
            _ => false,
        }
    }
}

/// The graph node type a CPU-backend node stands for.
fn cpu_node_type(kind: cpu::NodeKind) -> GraphNodeType {
    match kind {
        cpu::NodeKind::Kernel => GraphNodeType::KERNEL,
        cpu::NodeKind::Memcpy => GraphNodeType::MEMCPY,
        cpu::NodeKind::Memset => GraphNodeType::MEMSET,
        cpu::NodeKind::Host => GraphNodeType::HOST,
        cpu::NodeKind::Empty => GraphNodeType::EMPTY,
        cpu::NodeKind::Graph => GraphNodeType::GRAPH,
        cpu::NodeKind::EventRecord => GraphNodeType::EVENT_RECORD,
        cpu::NodeKind::EventWait => GraphNodeType::WAIT_EVENT,
        cpu::NodeKind::Conditional => GraphNodeType::CONDITIONAL,
    }
}

/// How many distinct objects a list of CPU-backend nodes keeps alive.
fn cpu_retained<'a>(nodes: impl Iterator<Item = &'a cpu::Node>) -> usize {
    let keys: HashSet<usize> = nodes
        .flat_map(|n| n.keep().iter().map(cpu::Keep::key))
        .collect();
    keys.len()
}

impl Graph {
    /// An empty graph, to build node by node (see the `add_*_node` methods).
    ///
    /// ```
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, DeviceBuffer, Graph, PinnedBuffer, Stream};
    /// let ctx = Context::cpu();
    /// let stream = Stream::new(&ctx)?;
    /// let input = PinnedBuffer::from_slice(&ctx, &[7u32; 4])?;
    /// let mut field = DeviceBuffer::<u32>::alloc(&ctx, 4)?;
    /// let mut out = PinnedBuffer::<u32>::zeros(&ctx, 4)?;
    /// let mut graph = Graph::new(&ctx)?;
    /// let up = graph.add_copy_htod_node(&[], &input, &mut field)?;
    /// let down = graph.add_copy_dtoh_node(&[up], &field, &mut out)?;
    /// assert_eq!(graph.edge_count()?, 1);
    /// graph.instantiate()?.launch(&stream)?;
    /// assert_eq!(out.to_vec()?, vec![7; 4]);
    /// # let _ = down;
    /// # Ok(()) }
    /// ```
    pub fn new(ctx: &Context) -> Result<Graph> {
        let backend = match ctx.kind() {
            crate::context::ContextBackend::Cuda(c) => GraphBackend::Cuda(cuda::Graph::new(c)?),
            crate::context::ContextBackend::Cpu(_) => GraphBackend::Cpu(cpu::Graph::default()),
        };
        Ok(Graph::from_backend(ctx, backend))
    }

    /// Wraps a backend graph of `ctx`.
    pub(crate) fn from_backend(ctx: &Context, backend: GraphBackend) -> Graph {
        let (id, root) = match &backend {
            GraphBackend::Cuda(g) => (g.id(), Scope::Cuda(0)),
            GraphBackend::Cpu(_) => (cpu_graph_id(), Scope::Cpu(Vec::new())),
        };
        Graph {
            ctx: ctx.clone(),
            backend,
            id,
            scopes: vec![root],
            loops: Vec::new(),
            instance: std::sync::Mutex::new(std::sync::Weak::new()),
            broken: false,
        }
    }

    /// The raw handle, owned by this `Graph`; `None` on the CPU backend.
    pub fn handle(&self) -> Option<sys::CUgraph> {
        match &self.backend {
            GraphBackend::Cuda(g) => Some(g.raw()),
            GraphBackend::Cpu(_) => None,
        }
    }

    /// The context the graph belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// How many distinct allocations, modules and closures the graph keeps alive for its
    /// nodes.
    pub fn retained_count(&self) -> usize {
        match &self.backend {
            GraphBackend::Cuda(g) => g
                .keep()
                .iter()
                .filter(|k| !matches!(k, cuda::Keep::Panics(_)))
                .count(),
            GraphBackend::Cpu(g) => cpu_retained(g.nodes().iter()),
        }
    }

    /// The number of nodes.
    pub fn node_count(&self) -> Result<usize> {
        match &self.backend {
            GraphBackend::Cuda(g) => g.node_count(),
            GraphBackend::Cpu(g) => Ok(g.node_count()),
        }
    }

    /// Every node, in the driver's order (creation order for captured graphs; capture order
    /// on the CPU backend).
    pub fn nodes(&self) -> Result<Vec<GraphNode>> {
        match &self.backend {
            GraphBackend::Cuda(g) => Ok(g
                .nodes()?
                .into_iter()
                .map(|(node, kind)| GraphNode {
                    graph: self.id,
                    scope: 0,
                    kind,
                    id: NodeId::Cuda(node),
                })
                .collect()),
            GraphBackend::Cpu(g) => Ok(g
                .nodes()
                .iter()
                .enumerate()
                .map(|(index, node)| GraphNode {
                    graph: self.id,
                    scope: 0,
                    kind: cpu_node_type(node.kind()),
                    id: NodeId::Cpu(index),
                })
                .collect()),
        }
    }

    fn cuda_kernel_node(&self, info: cuda::KernelNodeInfo) -> KernelNode {
        KernelNode {
            node: GraphNode {
                graph: self.id,
                scope: 0,
                kind: GraphNodeType::KERNEL,
                id: NodeId::Cuda(info.node),
            },
            kernel: KernelIdentity::Cuda(info.function),
            config: info.config,
        }
    }

    /// The kernel nodes, in the driver's order, with the function and geometry of each (on
    /// the CPU backend, in capture order).
    pub fn kernel_nodes(&self) -> Result<Vec<KernelNode>> {
        match &self.backend {
            GraphBackend::Cuda(g) => Ok(g
                .kernel_nodes()?
                .into_iter()
                .map(|info| self.cuda_kernel_node(info))
                .collect()),
            GraphBackend::Cpu(g) => Ok(g
                .nodes()
                .iter()
                .enumerate()
                .filter_map(|(index, node)| Some(self.cpu_kernel_node(index, node.kernel_tag()?)))
                .collect()),
        }
    }

    /// The kernel nodes of a captured graph in the order their launches were enqueued
    /// during the capture: what code that captured a known sequence of launches uses to
    /// find the node of each (e.g. to [set its parameters](GraphExec::set_kernel_params)).
    ///
    /// Each launch on a capturing stream records the node it added; kernel nodes that other
    /// code added to the capture are not in the list: a library called inside it (cuBLAS
    /// through cudarc, say), and launches made through the [`TypedStream`](crate::TypedStream)
    /// a pipeline's `call` statement hands to the function it calls. A graph built node by
    /// node, or captured without our launches, gives [`Graph::kernel_nodes`]. It is an error
    /// when some launch's node could not be identified.
    pub fn kernel_nodes_in_launch_order(&self) -> Result<Vec<KernelNode>> {
        match &self.backend {
            GraphBackend::Cuda(g) => Ok(g
                .kernel_nodes_in_launch_order()?
                .into_iter()
                .map(|info| self.cuda_kernel_node(info))
                .collect()),
            // Nodes are numbered in capture order already.
            GraphBackend::Cpu(g) => Ok(g
                .nodes()
                .iter()
                .enumerate()
                .filter_map(|(index, node)| {
                    let tag = node.kernel_tag().filter(|tag| !tag.in_call)?;
                    Some(self.cpu_kernel_node(index, tag))
                })
                .collect()),
        }
    }

    fn cpu_kernel_node(&self, index: usize, tag: cpu::KernelTag) -> KernelNode {
        KernelNode {
            node: GraphNode {
                graph: self.id,
                scope: 0,
                kind: GraphNodeType::KERNEL,
                id: NodeId::Cpu(index),
            },
            kernel: KernelIdentity::Cpu(tag.kernel),
            config: tag.config,
        }
    }

    /// The graph in Graphviz DOT form, as the driver writes it (`cuGraphDebugDotPrint`,
    /// verbose: kernel nodes show their function names and parameters); on the CPU backend,
    /// one box per node labelled with its stream.
    pub fn to_dot(&self) -> Result<String> {
        match &self.backend {
            GraphBackend::Cuda(g) => g.to_dot(),
            GraphBackend::Cpu(g) => Ok(g.to_dot()),
        }
    }

    /// Instantiates the graph into an executable graph. The executable graph is a snapshot:
    /// later edits of this graph do not change it (see [`GraphExec::update`]).
    ///
    /// A graph with conditional nodes (`while`/`if`) can have one executable graph at a time
    /// (a CUDA rule, kept on both backends): drop the previous one before instantiating again.
    ///
    /// On CUDA, the driver faults (the context is lost) when a device loop runs concurrently
    /// with another conditional node. So in every scope that holds a loop (a `while` node,
    /// or a conditional node whose body holds one), the conditional nodes that no path
    /// orders are ordered here, each after the one before in a topological order, by edges
    /// added to this graph. Results are the same; only their overlap goes. Executable
    /// graphs with loops are ordered the same way across graphs: a launch on another stream
    /// than the last such launch of the context waits for that stream's work enqueued so far
    /// (one stream replaying them all pays nothing). Not ordered: a launch into a capture,
    /// and a launch while the last such launch's stream is capturing.
    pub fn instantiate(&self) -> Result<GraphExec> {
        self.refuse_broken("Graph::instantiate")?;
        let instance = if self.has_conditional_nodes() {
            let mut alive = self
                .instance
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if alive.upgrade().is_some() {
                return Err(Error::invalid(
                    "Graph::instantiate",
                    "a graph with conditional nodes (device `while`/`if`) can have one \
                     executable graph at a time (a CUDA rule); drop the other one first, or \
                     build a second graph",
                ));
            }
            let token = Arc::new(());
            *alive = Arc::downgrade(&token);
            Some(token)
        } else {
            None
        };
        let backend = match &self.backend {
            GraphBackend::Cuda(g) => ExecBackend::Cuda(g.instantiate()?),
            GraphBackend::Cpu(g) => ExecBackend::Cpu(CpuExec::new(g.instantiate())),
        };
        Ok(GraphExec {
            ctx: self.ctx.clone(),
            source: self.id,
            backend,
            loops: self.loops.clone(),
            _instance: instance,
        })
    }

    /// The state of every `while` loop of the graph (bodies included), in the order they were
    /// added.
    pub fn loops(&self) -> &[LoopState] {
        &self.loops
    }

    /// `Err` when building a conditional body of the graph failed: what nothing may run (an
    /// instantiation, or an update of an executable graph), since the unfinished node lacks
    /// what the finished one has (on CUDA, the kernel that ends its loop; on the CPU backend,
    /// the body's memory in what launches gate and wait on).
    pub(super) fn refuse_broken(&self, call: &'static str) -> Result<()> {
        if self.broken {
            return Err(Error::invalid(
                call,
                "building a conditional body of this graph failed; build a new graph",
            ));
        }
        Ok(())
    }
}

/// Ids for CPU-backend graphs: the top bit set, so they never collide with CUDA graphs' ids,
/// which count up from 1.
fn cpu_graph_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed) | (1 << 63)
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("backend", &self.ctx.backend())
            .field("raw", &self.handle())
            .field("retained", &self.retained_count())
            .finish()
    }
}
