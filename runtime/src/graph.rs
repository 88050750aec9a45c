//! CUDA graphs: work recorded once (by stream capture, or node by node) and replayed many
//! times through an executable graph.
//!
//! Lifetimes: a [`Graph`] holds everything its nodes point at (device and pinned memory,
//! modules, host closures), and a [`GraphExec`] holds a copy of that list plus the graph
//! itself, so nothing a launch can touch is freed while the executable graph lives. Each
//! launch fences the pinned memory the graph copies from or to, so the host waits for the
//! launch before it reads or writes that memory. Dropping a launched `GraphExec` waits for
//! the context's work first.
//!
//! A launch borrows nothing, so it also checks that no host slice of pinned or managed
//! memory it touches is alive ([`HostSlice`](crate::HostSlice)), under the allocations'
//! gates, and records its fences before releasing them.
//!
//! On the host backend a graph is the engine's recording ([`HostGraph`]): nodes are numbered
//! in capture order, kernel nodes are identified by the kernel they launch, an executable
//! graph replays the nodes in that order on the launching stream's worker, and kernel
//! arguments are replaced in place as on CUDA. Building graphs node by node is CUDA-only.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::context::Context;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::host::{self, HostFault, HostGraph, HostGraphExec};
use crate::launch::host::host_arg_values;
use crate::launch::{KernelArgsFor, LaunchConfig, Retained, Signature, TypedKernel};
use crate::memory::alloc::{
    AllocKind, DeviceAlloc, KeepAlive, PinnedAlloc, borrowed_error, same_memory_space,
};
use crate::stream::Stream;
use crate::sys::{self, CUresult, CUstreamCaptureStatus};

/// The verdict of a whole-graph update (`CUgraphExecUpdateResult`).
pub use crate::sys::CUgraphExecUpdateResult as GraphUpdateResult;
/// A node's kind (`CUgraphNodeType`).
pub use crate::sys::CUgraphNodeType as GraphNodeType;

/// Process-unique graph ids, so a node handle is never mistaken for one of another graph
/// (raw `CUgraph` addresses are reused after a graph is destroyed).
static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// The owned `CUgraph`, shared by the [`Graph`] and every [`GraphExec`] made from it (the
/// driver matches an executable graph's nodes to the source graph's node handles, so the
/// source must outlive it).
struct GraphHandle {
    ctx: Context,
    raw: sys::CUgraph,
    id: u64,
    /// CUDA graphs are not internally synchronized: every driver call on `raw` holds this.
    lock: Mutex<()>,
}

// SAFETY: a CUgraph may be used from any thread; every call on it is serialized by `lock`.
unsafe impl Send for GraphHandle {}
// SAFETY: as above.
unsafe impl Sync for GraphHandle {}

impl GraphHandle {
    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for GraphHandle {
    fn drop(&mut self) {
        let Ok(c) = self.ctx.bound_cuda("Graph::drop") else {
            return;
        };
        // SAFETY: we own the graph and the last holder is going; executable graphs
        // instantiated from it hold this handle, so none is left.
        let code = unsafe { (c.driver.cuGraphDestroy)(self.raw) };
        if !code.is_success() {
            tracing::warn!(?code, "cuGraphDestroy failed while dropping a graph");
        }
    }
}

/// A graph recorded by [`Stream::end_capture`](crate::Stream::end_capture) or
/// [`Stream::capture`](crate::Stream::capture), or built node by node from [`Graph::new`].
pub struct Graph {
    handle: Arc<GraphHandle>,
    /// Memory, modules and host closures the graph's nodes point at.
    keepalive: Vec<KeepAlive>,
    /// The recorded operations on the host backend (`handle.raw` is then null).
    host: Option<HostGraph>,
}

/// One node of a [`Graph`]. A plain handle: it does not keep the graph alive, and calls that
/// take it check that it belongs to the graph they act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphNode {
    raw: sys::CUgraphNode,
    graph: u64,
    kind: GraphNodeType,
    /// The node's position in capture order on the host backend (`raw` is then null).
    index: usize,
}

/// What kind of node a host operation becomes, for [`Graph::nodes`] (retained by the op).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostNodeKind(pub(crate) GraphNodeType);

/// Which kernel a host kernel operation launches, and how (retained by the op).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostKernelTag {
    /// `KernelInner::id`.
    pub(crate) kernel: u64,
    /// The launch's geometry.
    pub(crate) config: LaunchConfig,
}

// SAFETY: a node handle is an identifier; it is only dereferenced by the driver, under the
// owning graph's lock, after checking that it belongs to that (live) graph.
unsafe impl Send for GraphNode {}
// SAFETY: as above.
unsafe impl Sync for GraphNode {}

impl GraphNode {
    /// The node's kind.
    pub fn kind(&self) -> GraphNodeType {
        self.kind
    }

    /// The raw handle, valid while its graph lives. Null on the host backend.
    pub fn handle(&self) -> sys::CUgraphNode {
        self.raw
    }

    /// The node's position in capture order, on the host backend (`None` on CUDA).
    pub fn host_index(&self) -> Option<usize> {
        self.raw.is_null().then_some(self.index)
    }
}

/// A kernel node: which function it launches and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelNode {
    node: GraphNode,
    function: sys::CUfunction,
    config: LaunchConfig,
    /// The kernel's id on the host backend (0 on CUDA, where `function` identifies it).
    host_kernel: u64,
}

// SAFETY: plain handles (see GraphNode); the function handle is only compared, never called.
unsafe impl Send for KernelNode {}
// SAFETY: as above.
unsafe impl Sync for KernelNode {}

impl KernelNode {
    /// The node.
    pub fn node(&self) -> GraphNode {
        self.node
    }

    /// The kernel's function handle: compare with [`Kernel::handle`](crate::Kernel::handle).
    /// Null on the host backend (use [`KernelNode::launches`]).
    pub fn function(&self) -> sys::CUfunction {
        self.function
    }

    /// The grid, block and shared memory the node was recorded with.
    pub fn config(&self) -> LaunchConfig {
        self.config
    }

    /// Whether the node launches `kernel`.
    pub fn launches<Sig>(&self, kernel: &TypedKernel<Sig>) -> bool {
        if self.host_kernel != 0 {
            return self.host_kernel == kernel.kernel().inner.id;
        }
        !self.function.is_null() && self.function == kernel.kernel().handle()
    }
}

impl Graph {
    /// An empty graph, to build node by node.
    pub fn new(ctx: &Context) -> Result<Graph> {
        let c = ctx.bound_cuda("Graph::new")?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; flags must be 0.
        check("cuGraphCreate", unsafe {
            (c.driver.cuGraphCreate)(&mut raw, 0)
        })?;
        // SAFETY: a new graph of this context that we own.
        Ok(unsafe { Graph::from_raw(ctx, raw, Vec::new()) })
    }

    /// Takes ownership of a graph handle.
    ///
    /// # Safety
    /// `raw` must be a live graph of `ctx`'s context that nothing else destroys, and
    /// `keepalive` must hold everything its nodes point at.
    pub(crate) unsafe fn from_raw(
        ctx: &Context,
        raw: sys::CUgraph,
        keepalive: Vec<KeepAlive>,
    ) -> Graph {
        Graph {
            handle: Arc::new(GraphHandle {
                ctx: ctx.clone(),
                raw,
                id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
                lock: Mutex::new(()),
            }),
            keepalive: dedup_keepalive(keepalive),
            host: None,
        }
    }

    /// Wraps a graph the host backend recorded. CUDA-only calls on it (node handles,
    /// editing, instantiating through the driver) fail with `BackendMismatch`, since its
    /// context is a host context.
    /// Its keep-alive list is what the captured operations retained (buffers, modules).
    pub(crate) fn from_host(ctx: &Context, graph: HostGraph) -> Graph {
        let keepalive = graph
            .nodes()
            .iter()
            .flat_map(|node| node.retained())
            .filter_map(|item| item.downcast_ref::<KeepAlive>().cloned())
            .collect();
        // SAFETY: a null graph is never passed to the driver: every driver call binds the
        // context first, which fails for a host context.
        let mut wrapped = unsafe { Graph::from_raw(ctx, std::ptr::null_mut(), keepalive) };
        wrapped.host = Some(graph);
        wrapped
    }

    /// The host backend's recording, when this graph has one.
    #[allow(dead_code)] // for code that inspects host recordings
    pub(crate) fn host(&self) -> Option<&HostGraph> {
        self.host.as_ref()
    }

    /// The raw handle, owned by this `Graph`.
    pub fn handle(&self) -> sys::CUgraph {
        self.handle.raw
    }

    /// The context the graph belongs to.
    pub fn context(&self) -> &Context {
        &self.handle.ctx
    }

    /// How many distinct allocations, modules and closures the graph keeps alive for its
    /// nodes.
    pub fn retained_count(&self) -> usize {
        self.keepalive.iter().filter(|k| counts(k)).count()
    }

    #[allow(dead_code)] // for the code that embeds graphs as child nodes
    pub(crate) fn keepalive(&self) -> &[KeepAlive] {
        &self.keepalive
    }

    /// The number of nodes.
    pub fn node_count(&self) -> Result<usize> {
        if let Some(h) = &self.host {
            return Ok(h.node_count());
        }
        let c = self.handle.ctx.bound_cuda("Graph::node_count")?;
        let mut count = 0;
        let _guard = self.handle.lock();
        // SAFETY: a live graph; a null node array asks for the count only.
        check("cuGraphGetNodes", unsafe {
            (c.driver.cuGraphGetNodes)(self.handle.raw, std::ptr::null_mut(), &mut count)
        })?;
        Ok(count)
    }

    /// Every node, in the driver's order (creation order for captured graphs; capture order
    /// on the host backend).
    pub fn nodes(&self) -> Result<Vec<GraphNode>> {
        if let Some(h) = &self.host {
            let nodes = h.nodes().iter().enumerate();
            return Ok(nodes
                .map(|(index, node)| GraphNode {
                    raw: std::ptr::null_mut(),
                    graph: self.handle.id,
                    kind: host_node_kind(node),
                    index,
                })
                .collect());
        }
        let c = self.handle.ctx.bound_cuda("Graph::nodes")?;
        let _guard = self.handle.lock();
        let mut count = 0;
        // SAFETY: as in node_count.
        check("cuGraphGetNodes", unsafe {
            (c.driver.cuGraphGetNodes)(self.handle.raw, std::ptr::null_mut(), &mut count)
        })?;
        let mut raw = vec![std::ptr::null_mut(); count];
        // SAFETY: `raw` has room for `count` handles; the driver writes at most that many
        // and stores the number written in `count`.
        check("cuGraphGetNodes", unsafe {
            (c.driver.cuGraphGetNodes)(self.handle.raw, raw.as_mut_ptr(), &mut count)
        })?;
        raw.truncate(count);
        raw.into_iter()
            .map(|node| {
                let mut kind = GraphNodeType::EMPTY;
                // SAFETY: a node of this live graph and a valid out-pointer.
                check("cuGraphNodeGetType", unsafe {
                    (c.driver.cuGraphNodeGetType)(node, &mut kind)
                })?;
                Ok(GraphNode {
                    raw: node,
                    graph: self.handle.id,
                    kind,
                    index: usize::MAX,
                })
            })
            .collect()
    }

    /// The kernel nodes, in the driver's order, with the function and geometry of each (on
    /// the host backend, in capture order).
    pub fn kernel_nodes(&self) -> Result<Vec<KernelNode>> {
        if let Some(h) = &self.host {
            let nodes = self.nodes()?.into_iter().zip(h.nodes());
            return Ok(nodes
                .filter(|(_, host)| host.is_kernel())
                .map(|(node, host)| {
                    let tag = host_kernel_tag(host);
                    KernelNode {
                        node,
                        function: std::ptr::null_mut(),
                        config: tag.map_or(LaunchConfig::new(1, 1), |t| t.config),
                        host_kernel: tag.map_or(0, |t| t.kernel),
                    }
                })
                .collect());
        }
        let nodes = self.nodes()?;
        let c = self.handle.ctx.bound_cuda("Graph::kernel_nodes")?;
        let _guard = self.handle.lock();
        nodes
            .into_iter()
            .filter(|n| n.kind == GraphNodeType::KERNEL)
            .map(|node| {
                // SAFETY: the all-zero pattern is valid for this C struct of integers and
                // pointers.
                let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
                // SAFETY: a kernel node of this live graph and a valid out-pointer.
                check("cuGraphKernelNodeGetParams", unsafe {
                    (c.driver.cuGraphKernelNodeGetParams)(node.raw, &mut p)
                })?;
                Ok(KernelNode {
                    node,
                    function: p.func,
                    config: LaunchConfig {
                        grid: (p.gridDimX, p.gridDimY, p.gridDimZ).into(),
                        block: (p.blockDimX, p.blockDimY, p.blockDimZ).into(),
                        shared_mem_bytes: p.sharedMemBytes,
                    },
                    host_kernel: 0,
                })
            })
            .collect()
    }

    /// The kernel nodes of a captured graph in the order their launches were enqueued
    /// during the capture: what code that captured a known sequence of launches uses to
    /// find the node of each (e.g. to [set its parameters](GraphExec::set_kernel_params)).
    ///
    /// On CUDA each typed or untyped launch on a capturing stream records the node it added
    /// (`cuStreamGetCaptureInfo`'s dependencies right after it); a graph built node by node,
    /// or captured without our launches, falls back to [`Graph::kernel_nodes`]. It is an
    /// error when some launch's node could not be identified. On the host backend nodes are
    /// numbered in capture order already.
    pub fn kernel_nodes_in_launch_order(&self) -> Result<Vec<KernelNode>> {
        const CALL: &str = "Graph::kernel_nodes_in_launch_order";
        let all = self.kernel_nodes()?;
        if self.host.is_some() {
            return Ok(all);
        }
        let Some(recorded) = self.keepalive.iter().find_map(captured_kernels) else {
            return Ok(all);
        };
        let unidentified = || {
            Error::invalid(
                CALL,
                "the capture's kernel launches could not all be matched with the graph's \
                 kernel nodes (a launch whose node the driver did not report, or kernel \
                 nodes added by other code)",
            )
        };
        if !recorded.complete.load(Ordering::Acquire) {
            return Err(unidentified());
        }
        let order = recorded
            .nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if order.len() != all.len() {
            return Err(unidentified());
        }
        order
            .iter()
            .map(|raw| {
                all.iter()
                    .find(|k| k.node.raw == *raw)
                    .copied()
                    .ok_or_else(unidentified)
            })
            .collect()
    }

    fn check_own(&self, call: &'static str, nodes: &[GraphNode]) -> Result<Vec<sys::CUgraphNode>> {
        nodes
            .iter()
            .map(|n| {
                if n.graph == self.handle.id {
                    Ok(n.raw)
                } else {
                    Err(Error::invalid(
                        call,
                        "a dependency is a node of another graph",
                    ))
                }
            })
            .collect()
    }

    /// Adds a node that does nothing, after `dependencies`: a join point.
    pub fn add_empty_node(&mut self, dependencies: &[GraphNode]) -> Result<GraphNode> {
        let deps = self.check_own("Graph::add_empty_node", dependencies)?;
        let c = self.handle.ctx.bound_cuda("Graph::add_empty_node")?;
        let _guard = self.handle.lock();
        let mut node = std::ptr::null_mut();
        // SAFETY: a live graph, nodes of it, and a valid out-pointer.
        check("cuGraphAddEmptyNode", unsafe {
            (c.driver.cuGraphAddEmptyNode)(&mut node, self.handle.raw, deps.as_ptr(), deps.len())
        })?;
        Ok(GraphNode {
            raw: node,
            graph: self.handle.id,
            kind: GraphNodeType::EMPTY,
            index: usize::MAX,
        })
    }

    /// Adds a launch of `kernel` with `args`, after `dependencies`. The graph keeps the
    /// buffers in `args` and the kernel's module alive.
    pub fn add_kernel_node<Sig: Signature, A: KernelArgsFor<Sig>>(
        &mut self,
        dependencies: &[GraphNode],
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<KernelNode> {
        const CALL: &str = "Graph::add_kernel_node";
        let deps = self.check_own(CALL, dependencies)?;
        let k = kernel.kernel();
        let c = self.handle.ctx.bound_cuda(CALL)?;
        if c.raw != k.context_raw() {
            return Err(Error::invalid(
                CALL,
                format!(
                    "`{}` is loaded in another context than the graph's",
                    k.name()
                ),
            ));
        }
        let mut retained = Retained::default();
        k.retain(&args, &mut retained);
        let handle = &self.handle;
        let node = k.with_node_params(CALL, &config, args, |params| {
            let _guard = handle.lock();
            let mut node = std::ptr::null_mut();
            // SAFETY: a live graph, nodes of it, and parameters whose argument pointers are
            // valid for this call (the driver copies the values).
            check("cuGraphAddKernelNode", unsafe {
                (c.driver.cuGraphAddKernelNode)(
                    &mut node,
                    handle.raw,
                    deps.as_ptr(),
                    deps.len(),
                    params,
                )
            })?;
            Ok(node)
        })?;
        extend_keepalive(&mut self.keepalive, retained.items);
        Ok(KernelNode {
            node: GraphNode {
                raw: node,
                graph: self.handle.id,
                kind: GraphNodeType::KERNEL,
                index: usize::MAX,
            },
            function: k.handle(),
            config,
            host_kernel: 0,
        })
    }

    /// Makes `to` run after `from`.
    pub fn add_dependency(&mut self, from: &GraphNode, to: &GraphNode) -> Result<()> {
        let ends = self.check_own("Graph::add_dependency", &[*from, *to])?;
        let c = self.handle.ctx.bound_cuda("Graph::add_dependency")?;
        let _guard = self.handle.lock();
        // SAFETY: a live graph and two of its nodes, one edge.
        check("cuGraphAddDependencies", unsafe {
            (c.driver.cuGraphAddDependencies)(self.handle.raw, &ends[0], &ends[1], 1)
        })
    }

    /// The graph in Graphviz DOT form, as the driver writes it (`cuGraphDebugDotPrint`,
    /// verbose: kernel nodes show their function names and parameters).
    pub fn to_dot(&self) -> Result<String> {
        const CALL: &str = "Graph::to_dot";
        if let Some(h) = &self.host {
            return Ok(h.to_dot());
        }
        let path = dot_temp_path(&std::env::temp_dir(), std::process::id(), next_dot_serial());
        let cpath = CString::new(path.to_string_lossy().into_owned())
            .map_err(|_| Error::invalid(CALL, "the temporary directory's path contains a NUL"))?;
        let c = self.handle.ctx.bound_cuda(CALL)?;
        let code = {
            let _guard = self.handle.lock();
            // SAFETY: a live graph and a NUL-terminated path.
            unsafe {
                (c.driver.cuGraphDebugDotPrint)(
                    self.handle.raw,
                    cpath.as_ptr(),
                    sys::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE,
                )
            }
        };
        let text = std::fs::read_to_string(&path);
        let _ = std::fs::remove_file(&path);
        check("cuGraphDebugDotPrint", code)?;
        text.map_err(|e| {
            Error::invalid(
                CALL,
                format!("reading back the DOT file `{}` failed: {e}", path.display()),
            )
        })
    }

    /// Instantiates the graph into an executable graph. The executable graph is a snapshot:
    /// later edits of this graph do not change it (see [`GraphExec::update`]).
    pub fn instantiate(&self) -> Result<GraphExec> {
        if let Some(h) = &self.host {
            let mut exec = GraphExec::empty(&self.handle, std::ptr::null_mut());
            exec.host = Some(h.instantiate());
            exec.source_nodes = h.nodes().iter().map(host_kernel_tag).collect();
            exec.retain(&self.keepalive);
            return Ok(exec);
        }
        let c = self.handle.ctx.bound_cuda("Graph::instantiate")?;
        let mut raw = std::ptr::null_mut();
        {
            let _guard = self.handle.lock();
            // SAFETY: a live graph and a valid out-pointer; no flags.
            check("cuGraphInstantiateWithFlags", unsafe {
                (c.driver.cuGraphInstantiateWithFlags)(&mut raw, self.handle.raw, 0)
            })?;
        }
        let mut exec = GraphExec::empty(&self.handle, raw);
        exec.retain(&self.keepalive);
        Ok(exec)
    }
}

/// A host node's kind: kernel, the kind its operation declared (copies, memsets), or host
/// work.
fn host_node_kind(node: &host::GraphNode) -> GraphNodeType {
    if node.is_kernel() {
        return GraphNodeType::KERNEL;
    }
    node.retained()
        .iter()
        .find_map(|r| r.downcast_ref::<HostNodeKind>())
        .map_or(GraphNodeType::HOST, |k| k.0)
}

fn host_kernel_tag(node: &host::GraphNode) -> Option<HostKernelTag> {
    node.retained()
        .iter()
        .find_map(|r| r.downcast_ref::<HostKernelTag>())
        .copied()
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("raw", &self.handle.raw)
            .field("retained", &self.keepalive.len())
            .finish()
    }
}

/// An executable graph: launch it on any stream of its context, as often as needed.
pub struct GraphExec {
    ctx: Context,
    raw: sys::CUgraphExec,
    /// The graph it was instantiated from: its node handles address this graph's nodes.
    source: Arc<GraphHandle>,
    keepalive: Vec<KeepAlive>,
    /// The identities of `keepalive`'s entries, so an in-place update that passes the same
    /// buffers again (the usual case) retains nothing new in O(arguments).
    keepalive_keys: HashSet<usize>,
    /// The pinned allocations among `keepalive`, fenced after each launch; sorted by
    /// address, the order launches take their gates in.
    pinned: Vec<Arc<PinnedAlloc>>,
    /// The managed allocations among `keepalive`, whose host slices block launches; sorted
    /// by address.
    managed: Vec<Arc<DeviceAlloc>>,
    /// The executable recording on the host backend (`raw` is then null).
    host: Option<HostGraphExec>,
    /// On the host backend, the kernel each node launches (for updates).
    source_nodes: Vec<Option<HostKernelTag>>,
    /// Whether any launch was enqueued, so Drop must wait for the context.
    launched: AtomicBool,
    /// Serializes launches and uploads: executable graphs are not internally synchronized.
    lock: Mutex<()>,
}

// SAFETY: a CUgraphExec may be used from any thread; `&self` calls are serialized by `lock`
// and edits take `&mut self`.
unsafe impl Send for GraphExec {}
// SAFETY: as above.
unsafe impl Sync for GraphExec {}

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
    fn empty(source: &Arc<GraphHandle>, raw: sys::CUgraphExec) -> GraphExec {
        GraphExec {
            ctx: source.ctx.clone(),
            raw,
            source: source.clone(),
            keepalive: Vec::new(),
            keepalive_keys: HashSet::new(),
            pinned: Vec::new(),
            managed: Vec::new(),
            host: None,
            source_nodes: Vec::new(),
            launched: AtomicBool::new(false),
            lock: Mutex::new(()),
        }
    }

    /// The raw handle, owned by this `GraphExec`.
    pub fn handle(&self) -> sys::CUgraphExec {
        self.raw
    }

    /// The context it belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// How many distinct allocations, modules and closures it keeps alive.
    pub fn retained_count(&self) -> usize {
        self.keepalive.iter().filter(|k| counts(k)).count()
    }

    fn retain(&mut self, items: &[KeepAlive]) {
        let mut host_visible_added = false;
        for item in items {
            if self.keepalive_keys.insert(keepalive_key(item)) {
                host_visible_added |= matches!(item, KeepAlive::Pinned(_))
                    || matches!(item, KeepAlive::Device(d) if d.kind == AllocKind::Managed);
                self.keepalive.push(item.clone());
            }
        }
        if host_visible_added {
            self.rebuild_gated();
        }
    }

    /// The pinned and managed allocations among `keepalive`, in gate order.
    fn rebuild_gated(&mut self) {
        self.pinned = self
            .keepalive
            .iter()
            .filter_map(|k| match k {
                KeepAlive::Pinned(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        self.pinned.sort_by_key(|p| Arc::as_ptr(p) as usize);
        self.managed = self
            .keepalive
            .iter()
            .filter_map(|k| match k {
                KeepAlive::Device(d) if d.kind == AllocKind::Managed => Some(d.clone()),
                _ => None,
            })
            .collect();
        self.managed.sort_by_key(|d| Arc::as_ptr(d) as usize);
    }

    fn stream_check(&self, call: &'static str, stream: &Stream) -> Result<()> {
        if same_memory_space(stream.context(), &self.ctx) {
            Ok(())
        } else {
            Err(Error::invalid(
                call,
                "the stream belongs to another context than the graph",
            ))
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
        self.stream_check(CALL, stream)?;
        // While the gates are held no host slice can be taken; a slice taken after waits for
        // the fences recorded before they are released.
        let managed_gates: Vec<_> = self.managed.iter().map(|m| m.gate()).collect();
        if self.managed.iter().any(|m| m.borrows.is_borrowed()) {
            return Err(borrowed_error(CALL, "managed"));
        }
        let mut gates: Vec<_> = self.pinned.iter().map(|p| p.gate()).collect();
        if gates.iter().any(|g| g.is_borrowed()) {
            return Err(borrowed_error(CALL, "pinned"));
        }
        for gate in &mut gates {
            gate.prepare_fence(stream)?;
        }
        if let Some(exec) = &self.host {
            let h = stream.host.as_ref().ok_or_else(|| {
                Error::invalid(CALL, "a host-backend graph needs a host-backend stream")
            })?;
            self.launched.store(true, Ordering::Release);
            // Captured into another graph: that graph's nodes retain what these retain.
            if !exec.launch_tracked(h)? {
                for gate in &mut gates {
                    gate.fence_after_enqueue(stream);
                }
            }
            drop(managed_gates);
            return Ok(());
        }
        let (c, raw) = stream.cuda(CALL)?;
        if stream.tracked_capture().is_some() {
            // Launched into another capture: that graph must keep this one's memory too.
            for item in &self.keepalive {
                stream.keep_alive_in_capture(|| item.clone());
            }
        }
        let code = {
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.launched.store(true, Ordering::Release);
            // SAFETY: a live executable graph and a live stream of its context; everything
            // its nodes touch is kept alive by `keepalive`.
            unsafe { (c.driver.cuGraphLaunch)(self.raw, raw) }
        };
        check("cuGraphLaunch", code)?;
        for gate in &mut gates {
            gate.fence_after_enqueue(stream);
        }
        drop(managed_gates);
        Ok(())
    }

    /// Uploads the graph's work to the device ahead of its first launch (`cuGraphUpload`),
    /// in `stream`'s order, so that launch starts faster.
    /// A no-op on the host backend.
    pub fn upload(&self, stream: &Stream) -> Result<()> {
        self.stream_check("GraphExec::upload", stream)?;
        if self.host.is_some() {
            return Ok(());
        }
        let (c, raw) = stream.cuda("GraphExec::upload")?;
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.launched.store(true, Ordering::Release);
        // SAFETY: a live executable graph and a live stream of its context.
        check("cuGraphUpload", unsafe {
            (c.driver.cuGraphUpload)(self.raw, raw)
        })
    }

    /// Changes the arguments (and geometry) of one kernel node in place, for the next
    /// launches: the way to update scalars between replays without re-instantiating.
    /// `node` must come from the graph this was instantiated from ([`Graph::kernel_nodes`])
    /// and launch `kernel`.
    pub fn set_kernel_params<Sig: Signature, A: KernelArgsFor<Sig>>(
        &mut self,
        node: &KernelNode,
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        const CALL: &str = "GraphExec::set_kernel_params";
        if node.node.graph != self.source.id {
            return Err(Error::invalid(
                CALL,
                "the node belongs to another graph than the one this was instantiated from",
            ));
        }
        let k = kernel.kernel();
        if !node.launches(kernel) {
            return Err(Error::invalid(
                CALL,
                format!("the node does not launch `{}`", k.name()),
            ));
        }
        if self.host.is_some() {
            config
                .validate(k.limits())
                .map_err(|e| k.config_error(CALL, e))?;
            let (values, keep) = host_arg_values::<Sig, A>(CALL, &self.ctx, &args)?;
            // New buffers must outlive every later launch: retained before the swap.
            self.retain(&keep);
            let index = node.node.index;
            if let Some(exec) = &mut self.host {
                exec.set_kernel_args(index, values)?;
            }
            return Ok(());
        }
        // New buffers must outlive every later launch: retain them before the driver sees them.
        let mut retained = Retained::default();
        k.retain(&args, &mut retained);
        self.retain(&retained.items);
        let c = self.ctx.bound_cuda(CALL)?;
        let raw = self.raw;
        k.with_node_params(CALL, &config, args, |params| {
            // SAFETY: a live executable graph, a kernel node of its source graph that runs
            // this function, and parameters valid for the call (the driver copies them).
            check("cuGraphExecKernelNodeSetParams", unsafe {
                (c.driver.cuGraphExecKernelNodeSetParams)(raw, node.node.raw, params)
            })
        })
    }

    /// Updates the whole executable graph to `graph`'s parameters: `graph` must have the
    /// same topology (same nodes and edges, kernels of the same functions), typically a
    /// fresh capture of the same code with other arguments. A refusal is a
    /// `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE` driver error whose description gives the
    /// driver's reason; [`GraphExec::try_update`] returns it as data instead.
    ///
    /// Node handles for [`GraphExec::set_kernel_params`] stay those of the original graph.
    pub fn update(&mut self, graph: &Graph) -> Result<()> {
        if self.host.is_some() {
            return self.host_update(graph).and_then(|outcome| match outcome {
                Ok(()) => Ok(()),
                Err((result, reason)) => Err(HostFault::GraphTopologyMismatch {
                    reason: format!("{result:?}: {reason}"),
                }
                .into()),
            });
        }
        let outcome = self.try_update(graph)?;
        if outcome.is_success() {
            return Ok(());
        }
        let mut e = crate::driver::driver_error(
            "cuGraphExecUpdate",
            CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
        );
        e.description = format!(
            "{}: {:?}{}",
            e.description,
            outcome.result,
            match outcome.error_node {
                Some(node) => format!(" at a {:?} node", node.kind),
                None => String::new(),
            }
        );
        Err(e.into())
    }

    /// [`GraphExec::update`], returning the driver's verdict and the node it names instead
    /// of an error when the update is refused.
    pub fn try_update(&mut self, graph: &Graph) -> Result<GraphUpdate> {
        const CALL: &str = "GraphExec::update";
        if !same_memory_space(graph.context(), &self.ctx) {
            return Err(Error::invalid(CALL, "the graph belongs to another context"));
        }
        if self.host.is_some() {
            return Ok(GraphUpdate {
                result: match self.host_update(graph)? {
                    Ok(()) => GraphUpdateResult::SUCCESS,
                    Err((result, _)) => result,
                },
                error_node: None,
                error_from_node: None,
            });
        }
        // Retained before the call: whatever the driver takes from `graph` must outlive us.
        self.retain(&graph.keepalive);
        let c = self.ctx.bound_cuda(CALL)?;
        let mut info = sys::CUgraphExecUpdateResultInfo {
            result: GraphUpdateResult::SUCCESS,
            errorNode: std::ptr::null_mut(),
            errorFromNode: std::ptr::null_mut(),
        };
        let code = {
            let _exec = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            let _graph = graph.handle.lock();
            // SAFETY: a live executable graph and graph of one context, and a valid
            // out-pointer.
            unsafe { (c.driver.cuGraphExecUpdate)(self.raw, graph.handle.raw, &mut info) }
        };
        if code != CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE {
            check("cuGraphExecUpdate", code)?;
        }
        let node = |raw: sys::CUgraphNode| -> Option<GraphNode> {
            if raw.is_null() {
                return None;
            }
            let mut kind = GraphNodeType::EMPTY;
            let _graph = graph.handle.lock();
            // SAFETY: a node the driver reported for `graph`, which is alive.
            let code = unsafe { (c.driver.cuGraphNodeGetType)(raw, &mut kind) };
            code.is_success().then_some(GraphNode {
                raw,
                graph: graph.handle.id,
                kind,
                index: usize::MAX,
            })
        };
        let result = if code.is_success() {
            GraphUpdateResult::SUCCESS
        } else if info.result == GraphUpdateResult::SUCCESS {
            GraphUpdateResult::ERROR
        } else {
            info.result
        };
        Ok(GraphUpdate {
            result,
            error_node: node(info.errorNode),
            error_from_node: node(info.errorFromNode),
        })
    }
}

impl GraphExec {
    /// [`GraphExec::try_update`] on the host backend: `Ok(Err((verdict, reason)))` when the
    /// new graph's shape or kernels differ, as the driver would refuse it.
    fn host_update(
        &mut self,
        graph: &Graph,
    ) -> Result<std::result::Result<(), (GraphUpdateResult, String)>> {
        const CALL: &str = "GraphExec::update";
        if !same_memory_space(graph.context(), &self.ctx) {
            return Err(Error::invalid(CALL, "the graph belongs to another context"));
        }
        let (Some(exec), Some(new)) = (&mut self.host, &graph.host) else {
            return Err(Error::invalid(
                CALL,
                "the graph was not recorded on the host backend",
            ));
        };
        let (old_count, new_count) = (exec.node_count(), new.node_count());
        if old_count != new_count {
            return Ok(Err((
                GraphUpdateResult::ERROR_TOPOLOGY_CHANGED,
                format!("it has {old_count} nodes and the new graph has {new_count}"),
            )));
        }
        // Kernel nodes must launch the same kernels (CUDA: the same functions).
        for (index, (old, new)) in self.source_nodes.iter().zip(new.nodes()).enumerate() {
            let (a, b) = (old.as_ref(), host_kernel_tag(new));
            if let (Some(a), Some(b)) = (a, b)
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
        match exec.update(new) {
            Ok(()) => {}
            Err(HostFault::GraphTopologyMismatch { reason }) => {
                return Ok(Err((GraphUpdateResult::ERROR_TOPOLOGY_CHANGED, reason)));
            }
            Err(other) => return Err(other.into()),
        }
        self.source_nodes = new.nodes().iter().map(host_kernel_tag).collect();
        self.retain(&graph.keepalive);
        Ok(Ok(()))
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        if let Some(host) = self.ctx.host_context() {
            // Host operations hold their memory; waiting keeps CUDA's blocking behaviour.
            if self.launched.load(Ordering::Acquire) {
                host.wait_idle();
            }
            return;
        }
        // A launch may still run: its nodes use the modules and closures we are about to
        // release, so wait for the context first.
        if self.launched.load(Ordering::Acquire)
            && let Err(e) = self.ctx.synchronize()
        {
            tracing::warn!(error = %e, "synchronizing before destroying a graph exec failed; leaking what it holds");
            // Whatever the nodes point at may still be in use: never free it.
            std::mem::forget(std::mem::take(&mut self.keepalive));
            std::mem::forget(std::mem::take(&mut self.pinned));
            return;
        }
        let Ok(c) = self.ctx.bound_cuda("GraphExec::drop") else {
            return;
        };
        // SAFETY: we own the executable graph and no launch of it is pending.
        let code = unsafe { (c.driver.cuGraphExecDestroy)(self.raw) };
        if !code.is_success() {
            tracing::warn!(
                ?code,
                "cuGraphExecDestroy failed while dropping a graph exec"
            );
        }
    }
}

impl std::fmt::Debug for GraphExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphExec")
            .field("raw", &self.raw)
            .field("retained", &self.keepalive.len())
            .finish()
    }
}

/// Whether a kept-alive object counts in `retained_count` (bookkeeping objects do not).
fn counts(k: &KeepAlive) -> bool {
    captured_kernels(k).is_none()
}

/// The kernel nodes one CUDA capture added, in launch order: recorded by the launch path
/// (see [`note_captured_kernel`]) and moved into the [`Graph`] with the capture's keep-alive
/// list, where [`Graph::kernel_nodes_in_launch_order`] finds it.
struct CapturedKernels {
    nodes: Mutex<Vec<sys::CUgraphNode>>,
    /// Cleared when a launch's node could not be identified.
    complete: AtomicBool,
}

// SAFETY: node handles are identifiers only compared here, never dereferenced.
unsafe impl Send for CapturedKernels {}
// SAFETY: as above; the list is behind a mutex.
unsafe impl Sync for CapturedKernels {}

/// The order list of each capture in progress (weak: the graph owns it once captured).
static CAPTURED_KERNELS: Mutex<Option<HashMap<u64, Weak<CapturedKernels>>>> = Mutex::new(None);

fn captured_kernels(k: &KeepAlive) -> Option<&CapturedKernels> {
    match k {
        KeepAlive::Object(object) => object.downcast_ref::<CapturedKernels>(),
        _ => None,
    }
}

/// Records the kernel node a launch just added to the capture `capture_id` on `stream`: the
/// stream's capture dependencies right after a kernel launch are exactly that node.
pub(crate) fn note_captured_kernel(stream: &Stream, capture_id: u64) {
    let node = captured_leaf(stream, capture_id);
    let order = {
        let mut map = CAPTURED_KERNELS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let map = map.get_or_insert_with(HashMap::new);
        match map.get(&capture_id).and_then(Weak::upgrade) {
            Some(order) => order,
            None => {
                map.retain(|_, order| order.strong_count() > 0);
                let order = Arc::new(CapturedKernels {
                    nodes: Mutex::new(Vec::new()),
                    complete: AtomicBool::new(true),
                });
                map.insert(capture_id, Arc::downgrade(&order));
                stream.keep_alive_in_capture_id(capture_id, KeepAlive::Object(order.clone()));
                order
            }
        }
    };
    match node {
        Some(node) => order
            .nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(node),
        None => order.complete.store(false, Ordering::Release),
    }
}

/// The one node the capture on `stream` would make the next work depend on, if the driver
/// reports exactly one for the capture `capture_id`.
fn captured_leaf(stream: &Stream, capture_id: u64) -> Option<sys::CUgraphNode> {
    let (c, raw) = stream.cuda("Graph::kernel_nodes_in_launch_order").ok()?;
    let mut status = CUstreamCaptureStatus::NONE;
    let mut id = 0;
    let mut deps: *const sys::CUgraphNode = std::ptr::null();
    let mut count = 0;
    // SAFETY: a live stream and valid out-pointers; the graph output is not wanted (null).
    let code = unsafe {
        (c.driver.cuStreamGetCaptureInfo)(
            raw,
            &mut status,
            &mut id,
            std::ptr::null_mut(),
            &mut deps,
            &mut count,
        )
    };
    if !code.is_success()
        || status != CUstreamCaptureStatus::ACTIVE
        || id != capture_id
        || count != 1
        || deps.is_null()
    {
        return None;
    }
    // SAFETY: the driver reports `count == 1` node at `deps`, valid until the next capture
    // call on the stream; it is copied out at once.
    Some(unsafe { *deps })
}

/// The address identifying a kept-alive object, for de-duplication.
fn keepalive_key(k: &KeepAlive) -> usize {
    match k {
        KeepAlive::Device(a) => Arc::as_ptr(a) as *const () as usize,
        KeepAlive::Pinned(a) => Arc::as_ptr(a) as *const () as usize,
        KeepAlive::Object(a) => Arc::as_ptr(a) as *const () as usize,
    }
}

/// Drops repeated entries (a buffer passed to 100 captured launches is kept once).
pub(crate) fn dedup_keepalive(items: Vec<KeepAlive>) -> Vec<KeepAlive> {
    let mut out = Vec::with_capacity(items.len());
    extend_keepalive(&mut out, items);
    out
}

fn extend_keepalive(list: &mut Vec<KeepAlive>, items: impl IntoIterator<Item = KeepAlive>) {
    let mut seen: HashSet<usize> = list.iter().map(keepalive_key).collect();
    for item in items {
        if seen.insert(keepalive_key(&item)) {
            list.push(item);
        }
    }
}

static DOT_SERIAL: AtomicU64 = AtomicU64::new(0);

fn next_dot_serial() -> u64 {
    DOT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// Where `to_dot` has the driver write: unique per process and call.
pub(crate) fn dot_temp_path(dir: &Path, pid: u32, serial: u64) -> PathBuf {
    dir.join(format!("gpu-pipeline-graph-{pid}-{serial}.dot"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keepalive_lists_hold_each_object_once() {
        let a: Arc<dyn std::any::Any + Send + Sync> = Arc::new(1u32);
        let b: Arc<dyn std::any::Any + Send + Sync> = Arc::new(2u32);
        let list = dedup_keepalive(vec![
            KeepAlive::Object(a.clone()),
            KeepAlive::Object(b.clone()),
            KeepAlive::Object(a.clone()),
        ]);
        assert_eq!(list.len(), 2);
        let mut list = list;
        extend_keepalive(&mut list, [KeepAlive::Object(b.clone())]);
        assert_eq!(list.len(), 2);
        assert_eq!(Arc::strong_count(&a), 2);
    }

    #[test]
    fn dot_paths_are_unique_per_process_and_call() {
        let dir = Path::new("/tmp");
        assert_eq!(
            dot_temp_path(dir, 42, 7),
            Path::new("/tmp/gpu-pipeline-graph-42-7.dot")
        );
        assert_ne!(dot_temp_path(dir, 42, 7), dot_temp_path(dir, 42, 8));
        assert_ne!(next_dot_serial(), next_dot_serial());
    }
}
