//! Graphs: work recorded once (by stream capture, or node by node) and replayed many times
//! through an executable graph.
//!
//! Lifetimes: a [`Graph`] holds everything its nodes point at (device and pinned memory,
//! modules, host closures), and a [`GraphExec`] holds a copy of that list plus the graph
//! itself, so nothing a launch can touch is freed while the executable graph lives. Each
//! launch makes the host wait for it before it touches pinned memory the graph copies, and a
//! launch, which borrows nothing, refuses to run while a host slice
//! ([`HostSlice`](crate::HostSlice)) of pinned or managed memory it touches is alive. The
//! rules live with each backend (`cuda/graph.rs`; `cpu/graph.rs` and `cpu/memory.rs`).
//!
//! On the CPU backend a graph is the engine's recording: nodes are numbered in capture order,
//! kernel nodes are identified by the kernel they launch, an executable graph replays the
//! nodes in that order on the launching stream's worker, and kernel arguments are replaced in
//! place as on CUDA. Building graphs node by node is CUDA-only.

mod capture;
mod updates;

use std::collections::HashSet;
use std::sync::Arc;

pub use capture::{CaptureMode, CaptureStatus, exchange_thread_capture_mode};
pub use updates::KernelUpdates;

use crate::context::Context;
use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::launch::{CudaArgsOf, KernelArgsFor, LaunchConfig, Signature, TypedKernel};
use crate::module::KernelBackend;
use crate::stream::{Stream, StreamBackend, mixed};
use crate::sys;

/// The verdict of a whole-graph update (`CUgraphExecUpdateResult`).
pub use crate::sys::CUgraphExecUpdateResult as GraphUpdateResult;
/// A node's kind (`CUgraphNodeType`).
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
}

/// The one backend value a [`Graph`] holds.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphNode {
    graph: u64,
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
    /// An empty graph, to build node by node (CUDA only).
    pub fn new(ctx: &Context) -> Result<Graph> {
        let c = ctx.cuda_only("Graph::new")?;
        Ok(Graph::from_backend(
            ctx,
            GraphBackend::Cuda(cuda::Graph::new(c)?),
        ))
    }

    /// Wraps a backend graph of `ctx`.
    pub(crate) fn from_backend(ctx: &Context, backend: GraphBackend) -> Graph {
        let id = match &backend {
            GraphBackend::Cuda(g) => g.id(),
            GraphBackend::Cpu(_) => cpu_graph_id(),
        };
        Graph {
            ctx: ctx.clone(),
            backend,
            id,
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
                .filter_map(|(index, node)| {
                    let tag = node.kernel_tag()?;
                    Some(KernelNode {
                        node: GraphNode {
                            graph: self.id,
                            kind: GraphNodeType::KERNEL,
                            id: NodeId::Cpu(index),
                        },
                        kernel: KernelIdentity::Cpu(tag.kernel),
                        config: tag.config,
                    })
                })
                .collect()),
        }
    }

    /// The kernel nodes of a captured graph in the order their launches were enqueued
    /// during the capture: what code that captured a known sequence of launches uses to
    /// find the node of each (e.g. to [set its parameters](GraphExec::set_kernel_params)).
    ///
    /// On CUDA each launch on a capturing stream records the node it added; kernel nodes
    /// that other code added to the capture (a library called inside it) are not in the
    /// list. A graph built node by node, or captured without our launches, gives
    /// [`Graph::kernel_nodes`]. It is an error when some launch's node could not be
    /// identified. On the CPU backend nodes are numbered in capture order already.
    pub fn kernel_nodes_in_launch_order(&self) -> Result<Vec<KernelNode>> {
        match &self.backend {
            GraphBackend::Cuda(g) => Ok(g
                .kernel_nodes_in_launch_order()?
                .into_iter()
                .map(|info| self.cuda_kernel_node(info))
                .collect()),
            GraphBackend::Cpu(_) => self.kernel_nodes(),
        }
    }

    fn cuda_nodes(&self, call: &'static str, nodes: &[GraphNode]) -> Result<Vec<cuda::NodeRef>> {
        nodes
            .iter()
            .map(|n| match n.id {
                NodeId::Cuda(node) if n.graph == self.id => Ok(node),
                _ => Err(Error::invalid(
                    call,
                    "a dependency is a node of another graph",
                )),
            })
            .collect()
    }

    fn cuda_mut(&mut self, call: &'static str) -> Result<&mut cuda::Graph> {
        match &mut self.backend {
            GraphBackend::Cuda(g) => Ok(g),
            GraphBackend::Cpu(_) => Err(Error::cuda_only(call)),
        }
    }

    /// Adds a node that does nothing, after `dependencies`: a join point (CUDA only).
    pub fn add_empty_node(&mut self, dependencies: &[GraphNode]) -> Result<GraphNode> {
        const CALL: &str = "Graph::add_empty_node";
        let deps = self.cuda_nodes(CALL, dependencies)?;
        let node = self.cuda_mut(CALL)?.add_empty_node(&deps)?;
        Ok(GraphNode {
            graph: self.id,
            kind: GraphNodeType::EMPTY,
            id: NodeId::Cuda(node),
        })
    }

    /// Adds a launch of `kernel` with `args`, after `dependencies` (CUDA only). The graph
    /// keeps the buffers in `args` and the kernel's module alive.
    pub fn add_kernel_node<Sig: Signature, A: KernelArgsFor<Sig>>(
        &mut self,
        dependencies: &[GraphNode],
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<KernelNode> {
        const CALL: &str = "Graph::add_kernel_node";
        let deps = self.cuda_nodes(CALL, dependencies)?;
        let k = kernel.kernel();
        k.validate_for(CALL, &config)?;
        let function = k.cuda_only(CALL)?;
        let node =
            self.cuda_mut(CALL)?
                .add_kernel_node(&deps, function, &config, &CudaArgsOf(&args))?;
        Ok(KernelNode {
            node: GraphNode {
                graph: self.id,
                kind: GraphNodeType::KERNEL,
                id: NodeId::Cuda(node),
            },
            kernel: KernelIdentity::Cuda(function.id()),
            config,
        })
    }

    /// Makes `to` run after `from` (CUDA only).
    pub fn add_dependency(&mut self, from: &GraphNode, to: &GraphNode) -> Result<()> {
        const CALL: &str = "Graph::add_dependency";
        let ends = self.cuda_nodes(CALL, &[*from, *to])?;
        self.cuda_mut(CALL)?.add_dependency(&ends[0], &ends[1])
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
    pub fn instantiate(&self) -> Result<GraphExec> {
        let backend = match &self.backend {
            GraphBackend::Cuda(g) => ExecBackend::Cuda(g.instantiate()?),
            GraphBackend::Cpu(g) => ExecBackend::Cpu(CpuExec::new(g.instantiate())),
        };
        Ok(GraphExec {
            ctx: self.ctx.clone(),
            source: self.id,
            backend,
        })
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

/// An executable graph: launch it on any stream of its context, as often as needed.
pub struct GraphExec {
    ctx: Context,
    /// The id of the graph it was instantiated from.
    source: u64,
    backend: ExecBackend,
}

/// The one backend value a [`GraphExec`] holds.
enum ExecBackend {
    Cuda(cuda::GraphExec),
    Cpu(CpuExec),
}

/// A CPU-backend executable graph, with the host-visible memory its launches gate on.
struct CpuExec {
    exec: cpu::GraphExec,
    host_visible: Vec<Arc<cpu::Memory>>,
}

impl CpuExec {
    fn new(exec: cpu::GraphExec) -> CpuExec {
        let mut cpu = CpuExec {
            exec,
            host_visible: Vec::new(),
        };
        cpu.refresh();
        cpu
    }

    /// Recomputes the host-visible memory after the nodes changed, sorted (gate order).
    fn refresh(&mut self) {
        let mut memories: Vec<Arc<cpu::Memory>> = Vec::new();
        for node in self.exec.nodes() {
            for memory in cpu::Op::memories(node.keep()) {
                if memory.kind() != cpu::MemoryKind::Device
                    && !memories.iter().any(|m| Arc::ptr_eq(m, memory))
                {
                    memories.push(memory.clone());
                }
            }
        }
        memories.sort_by_key(|m| m.id());
        self.host_visible = memories;
    }
}

/// The outcome of [`GraphExec::try_update`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphUpdate {
    /// The driver's verdict: `SUCCESS`, or why the update was refused.
    pub result: GraphUpdateResult,
    /// The node of the new graph the refusal is about, if the driver named one.
    pub error_node: Option<GraphNode>,
    /// For a changed edge, the node it starts from.
    pub error_from_node: Option<GraphNode>,
}

impl GraphUpdate {
    /// Whether the executable graph now runs the new graph's parameters.
    pub fn is_success(&self) -> bool {
        self.result == GraphUpdateResult::SUCCESS
    }
}

impl GraphExec {
    /// The raw handle, owned by this `GraphExec`; `None` on the CPU backend.
    pub fn handle(&self) -> Option<sys::CUgraphExec> {
        match &self.backend {
            ExecBackend::Cuda(e) => Some(e.raw()),
            ExecBackend::Cpu(_) => None,
        }
    }

    /// The context it belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// How many distinct allocations, modules and closures it keeps alive.
    pub fn retained_count(&self) -> usize {
        match &self.backend {
            ExecBackend::Cuda(e) => e
                .keep()
                .iter()
                .filter(|k| !matches!(k, cuda::Keep::Panics(_)))
                .count(),
            ExecBackend::Cpu(e) => cpu_retained(e.exec.nodes()),
        }
    }

    /// Enqueues one run of the whole graph on `stream`. The host may touch pinned memory
    /// the graph copies only after this launch completes (the buffers wait on their own).
    ///
    /// A launch borrows none of the memory the graph touches, so it fails while a host slice
    /// ([`HostSlice`](crate::HostSlice), from `as_slice` / `as_mut_slice`) of pinned or
    /// managed memory the graph touches is alive: drop the slice before launching.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        const CALL: &str = "GraphExec::launch";
        if !self.ctx.shares_memory_with(stream.context()) {
            return Err(Error::mismatch(
                CALL,
                "the stream belongs to another context than the graph",
            ));
        }
        match (&self.backend, stream.kind()) {
            (ExecBackend::Cuda(e), StreamBackend::Cuda(s)) => e.launch(s),
            (ExecBackend::Cpu(e), StreamBackend::Cpu(s)) => {
                // While the gates are held no host slice can be taken; one taken later waits
                // for this launch's pending work.
                let gates: Vec<_> = e.host_visible.iter().map(|m| m.gate()).collect();
                if e.host_visible.iter().any(|m| m.is_borrowed()) {
                    return Err(Error::invalid(
                        CALL,
                        "a host slice of pinned or managed memory this graph touches is alive \
                         (from `as_slice` or `as_mut_slice`); drop the slice before launching",
                    ));
                }
                s.launch(&e.exec)?;
                drop(gates);
                Ok(())
            }
            _ => Err(mixed(CALL, "graph")),
        }
    }

    /// Uploads the graph's work to the device ahead of its first launch (`cuGraphUpload`),
    /// in `stream`'s order, so that launch starts faster. A no-op on the CPU backend.
    pub fn upload(&self, stream: &Stream) -> Result<()> {
        const CALL: &str = "GraphExec::upload";
        if !self.ctx.shares_memory_with(stream.context()) {
            return Err(Error::mismatch(
                CALL,
                "the stream belongs to another context than the graph",
            ));
        }
        match (&self.backend, stream.kind()) {
            (ExecBackend::Cuda(e), StreamBackend::Cuda(s)) => e.upload(s),
            (ExecBackend::Cpu(_), StreamBackend::Cpu(_)) => Ok(()),
            _ => Err(mixed(CALL, "graph")),
        }
    }

    /// Changes the arguments (and geometry) of one kernel node in place, for the next
    /// launches: the way to update scalars between replays without re-instantiating.
    /// `node` must come from the graph this was instantiated from ([`Graph::kernel_nodes`])
    /// and launch `kernel`. New buffers are kept alive by the executable graph from now on.
    /// To update many nodes, one batch ([`GraphExec::kernel_updates`]) costs less.
    pub fn set_kernel_params<Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
        &mut self,
        node: &KernelNode,
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        self.kernel_updates()?.set(node, kernel, config, args)
    }

    /// Updates the whole executable graph to `graph`'s parameters: `graph` must have the
    /// same topology (same nodes and edges, kernels of the same functions), typically a
    /// fresh capture of the same code with other arguments. A refusal is a
    /// `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE` driver error whose description gives the
    /// driver's reason; [`GraphExec::try_update`] returns it as data instead.
    ///
    /// Node handles for [`GraphExec::set_kernel_params`] stay those of the original graph.
    pub fn update(&mut self, graph: &Graph) -> Result<()> {
        if let ExecBackend::Cpu(_) = self.backend {
            return self.cpu_update(graph).and_then(|outcome| match outcome {
                Ok(()) => Ok(()),
                Err((result, reason)) => Err(cpu::CpuFault::GraphTopologyMismatch {
                    reason: format!("{result:?}: {reason}"),
                }
                .into()),
            });
        }
        if !self.ctx.shares_memory_with(&graph.ctx) {
            return Err(Error::mismatch(
                "GraphExec::update",
                "the graph belongs to another context",
            ));
        }
        match (&mut self.backend, &graph.backend) {
            (ExecBackend::Cuda(e), GraphBackend::Cuda(g)) => {
                let outcome = e.update(g)?;
                if outcome.result == GraphUpdateResult::SUCCESS {
                    Ok(())
                } else {
                    Err(cuda::GraphExec::update_error(&outcome))
                }
            }
            _ => Err(mixed("GraphExec::update", "graph")),
        }
    }

    /// [`GraphExec::update`], returning the driver's verdict and the node it names instead
    /// of an error when the update is refused.
    pub fn try_update(&mut self, graph: &Graph) -> Result<GraphUpdate> {
        const CALL: &str = "GraphExec::update";
        if !self.ctx.shares_memory_with(&graph.ctx) {
            return Err(Error::mismatch(
                CALL,
                "the graph belongs to another context",
            ));
        }
        match (&mut self.backend, &graph.backend) {
            (ExecBackend::Cuda(e), GraphBackend::Cuda(g)) => {
                let outcome = e.update(g)?;
                let node = |n: Option<(cuda::NodeRef, GraphNodeType)>| {
                    n.map(|(node, kind)| GraphNode {
                        graph: graph.id,
                        kind,
                        id: NodeId::Cuda(node),
                    })
                };
                Ok(GraphUpdate {
                    result: outcome.result,
                    error_node: node(outcome.error_node),
                    error_from_node: node(outcome.error_from_node),
                })
            }
            (ExecBackend::Cpu(_), GraphBackend::Cpu(_)) => Ok(GraphUpdate {
                result: match self.cpu_update(graph)? {
                    Ok(()) => GraphUpdateResult::SUCCESS,
                    Err((result, _)) => result,
                },
                error_node: None,
                error_from_node: None,
            }),
            _ => Err(mixed(CALL, "graph")),
        }
    }

    /// [`GraphExec::try_update`] on the CPU backend: `Ok(Err((verdict, reason)))` when the
    /// new graph's shape or kernels differ, as the driver would refuse it.
    fn cpu_update(
        &mut self,
        graph: &Graph,
    ) -> Result<std::result::Result<(), (GraphUpdateResult, String)>> {
        const CALL: &str = "GraphExec::update";
        if !self.ctx.shares_memory_with(&graph.ctx) {
            return Err(Error::mismatch(
                CALL,
                "the graph belongs to another context",
            ));
        }
        let (ExecBackend::Cpu(e), GraphBackend::Cpu(new)) = (&mut self.backend, &graph.backend)
        else {
            return Err(mixed(CALL, "graph"));
        };
        let (old_count, new_count) = (e.exec.node_count(), new.node_count());
        if old_count != new_count {
            return Ok(Err((
                GraphUpdateResult::ERROR_TOPOLOGY_CHANGED,
                format!("it has {old_count} nodes and the new graph has {new_count}"),
            )));
        }
        // Kernel nodes must launch the same kernels (CUDA: the same functions).
        for (index, (old, new)) in e.exec.nodes().zip(new.nodes()).enumerate() {
            if let (Some(a), Some(b)) = (old.kernel_tag(), new.kernel_tag())
                && a.kernel != b.kernel
            {
                return Ok(Err((
                    GraphUpdateResult::ERROR_FUNCTION_CHANGED,
                    format!(
                        "kernel node {index} (`{}`) launches another kernel",
                        new.label()
                    ),
                )));
            }
        }
        match e.exec.update(new) {
            Ok(()) => {}
            Err(cpu::CpuFault::GraphTopologyMismatch { reason }) => {
                return Ok(Err((GraphUpdateResult::ERROR_TOPOLOGY_CHANGED, reason)));
            }
            Err(other) => return Err(other.into()),
        }
        e.refresh();
        Ok(Ok(()))
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // Keeps CUDA's blocking behaviour on the CPU backend too (the nodes hold their
        // memory, so nothing is freed early either way).
        if let ExecBackend::Cpu(_) = self.backend
            && let crate::context::ContextBackend::Cpu(c) = self.ctx.kind()
        {
            c.wait_idle();
        }
    }
}

impl std::fmt::Debug for GraphExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphExec")
            .field("raw", &self.handle())
            .field("retained", &self.retained_count())
            .finish()
    }
}
