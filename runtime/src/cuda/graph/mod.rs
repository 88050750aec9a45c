//! CUDA graphs and executable graphs.
//!
//! Lifetimes: a [`Graph`] holds everything its nodes point at (device and pinned memory,
//! modules, host closures), and a [`GraphExec`] holds a copy of that list plus the graph
//! itself (the driver matches an executable graph's nodes to the source graph's node
//! handles), so nothing a launch can touch is freed while the executable graph lives. Each
//! launch fences the pinned memory the graph copies from or to, so the host waits for the
//! launch before it reads or writes that memory; and a launch, which borrows nothing, refuses
//! to run while a host slice of pinned or managed memory it touches is alive, checked under
//! the allocations' gates. Dropping a launched `GraphExec` waits for the context's work first.

use std::collections::HashSet;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::driver::{check, driver_error};
use crate::error::{Error, Result};
use crate::free_rule::AllocKind;
use crate::launch::config::LaunchConfig;
use crate::panic_log::PanicLog;
use crate::sys::{self, CUgraphExecUpdateResult, CUgraphNodeType, CUresult};

use super::keep::{self, CaptureRecord, Checked, Keep, KeySet};
use super::launch::{CudaArgs, with_node_params};
use super::module::FunctionId;
use super::{Context, DeviceMemory, Function, PinnedMemory, Stream};
use kept::check_node;

mod build;
mod conditional;
mod exec;
mod kept;
mod lane;
mod loops;
mod updates;

pub(crate) use lane::stream_closing;

pub(crate) use build::CopyEnd;
pub(crate) use conditional::{ConditionArgs, ConditionKind, keep_condition_module};
pub(crate) use exec::{GraphExec, borrowed_error};
pub(crate) use updates::KernelUpdates;

/// Process-unique graph ids, so a node of one graph is never taken for one of another (raw
/// `CUgraph` addresses are reused after a graph is destroyed).
static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// The owned `CUgraph`, shared by the [`Graph`] and every [`GraphExec`] made from it.
///
/// Invariant: `raw` is a graph of `ctx` that this value alone destroys, once, in `Drop`; every
/// driver call on it holds `lock` (CUDA graphs are not internally synchronized).
struct GraphHandle {
    ctx: Arc<Context>,
    raw: sys::CUgraph,
    id: u64,
    lock: Mutex<()>,
}

// SAFETY: a CUgraph may be used from any thread; every call on it is serialized by `lock`.
unsafe impl Send for GraphHandle {}
// SAFETY: as above.
unsafe impl Sync for GraphHandle {}

impl GraphHandle {
    #[inline]
    fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for GraphHandle {
    fn drop(&mut self) {
        let Ok(d) = self.ctx.bind() else {
            return;
        };
        // SAFETY: we own the graph and the last holder is going; executable graphs
        // instantiated from it hold this handle, so none is left.
        let code = unsafe { (d.cuGraphDestroy)(self.raw) };
        if !code.is_success() {
            tracing::warn!(?code, "cuGraphDestroy failed while dropping a graph");
        }
    }
}

/// A node of a graph, as handed out by that graph: only this module builds one, so a
/// `NodeRef` whose `graph` matches a graph's id is one of its nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NodeRef {
    graph: u64,
    raw: sys::CUgraphNode,
}

// SAFETY: a node handle is an identifier; it is only dereferenced by the driver, under the
// owning graph's lock, after checking that it belongs to that (live) graph.
unsafe impl Send for NodeRef {}
// SAFETY: as above.
unsafe impl Sync for NodeRef {}

impl NodeRef {
    /// A node of no graph (graph ids start at 1): what a caller passes for a dependency it
    /// refuses itself, so the iterator it hands over stays exact in length.
    pub(crate) const NONE: NodeRef = NodeRef {
        graph: 0,
        raw: std::ptr::null_mut(),
    };

    /// The raw handle, for interop (valid while its graph lives).
    pub(crate) fn raw(&self) -> sys::CUgraphNode {
        self.raw
    }
}

/// A kernel node's function and geometry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelNodeInfo {
    pub(crate) node: NodeRef,
    pub(crate) function: FunctionId,
    pub(crate) config: LaunchConfig,
}

/// A CUDA graph.
///
/// Invariant (besides `GraphHandle`'s): every handle in `bodies` is a body graph of a
/// conditional node of this graph (or of a body before it), owned by the driver and alive as
/// long as `handle` is; calls on bodies hold `handle`'s lock too.
pub(crate) struct Graph {
    handle: Arc<GraphHandle>,
    keep: Vec<Keep>,
    /// The keys of `keep` ([`Keep::key`]), so adding a node asks a set whether its module
    /// and buffers are kept already instead of rebuilding one from `keep` each time.
    keep_keys: KeySet,
    /// Modules and buffers that kernel nodes named before, checked (of the graph's context)
    /// and kept: a node that names them again skips the check and the set.
    checked: Checked,
    /// The kernel node each launch of the capture added, in launch order (captured graphs).
    kernel_order: Option<(Vec<sys::CUgraphNode>, bool)>,
    /// The body graphs of its conditional nodes: scope `k` is `bodies[k - 1]`, scope 0 the
    /// graph itself.
    bodies: Vec<sys::CUgraph>,
    /// Its conditional nodes and loops: instantiation chains the conditional nodes of each
    /// scope that holds a loop (`loops.rs`).
    loops: loops::LoopNodes,
    /// Memory its nodes use is being zeroed on the legacy stream (condition words and
    /// counters, `DeviceMemory::alloc_zeroing`): waited for before the graph is instantiated,
    /// updates an instantiation or is cloned, so that no launch of it can precede the memset.
    zeroing: AtomicBool,
}

/// How many dependencies of a node [`RawDeps`] holds without allocating.
const INLINE_DEPS: usize = 4;

/// A node's dependencies as the driver takes them: on the stack up to [`INLINE_DEPS`], so a
/// node in a chain (one dependency) costs no allocation.
enum RawDeps {
    Inline([sys::CUgraphNode; INLINE_DEPS], usize),
    Heap(Vec<sys::CUgraphNode>),
}

impl RawDeps {
    fn new(nodes: &[NodeRef]) -> RawDeps {
        RawDeps::collect(nodes.iter().map(|n| n.raw))
    }

    fn collect(nodes: impl ExactSizeIterator<Item = sys::CUgraphNode>) -> RawDeps {
        if nodes.len() > INLINE_DEPS {
            return RawDeps::Heap(nodes.collect());
        }
        let mut inline = [std::ptr::null_mut(); INLINE_DEPS];
        let mut len = 0;
        for (slot, node) in inline.iter_mut().zip(nodes) {
            *slot = node;
            len += 1;
        }
        RawDeps::Inline(inline, len)
    }
}

impl std::ops::Deref for RawDeps {
    type Target = [sys::CUgraphNode];

    #[inline]
    fn deref(&self) -> &[sys::CUgraphNode] {
        match self {
            RawDeps::Inline(nodes, len) => &nodes[..*len],
            RawDeps::Heap(nodes) => nodes,
        }
    }
}

/// Drops repeated entries (a buffer passed to 100 captured launches is kept once).
fn extend_keep(
    list: &mut Vec<Keep>,
    keys: &mut KeySet,
    items: impl IntoIterator<Item = Keep>,
) -> bool {
    let mut added = false;
    for item in items {
        if keys.insert(item.key()) {
            list.push(item);
            added = true;
        }
    }
    added
}

impl Graph {
    /// An empty graph, to build node by node.
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<Graph> {
        let d = ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; flags must be 0.
        check("cuGraphCreate", unsafe { (d.cuGraphCreate)(&mut raw, 0) })?;
        // SAFETY: a new graph of this context that we own, with no nodes yet.
        Ok(unsafe { Graph::from_raw(ctx, raw, CaptureRecord::default()) })
    }

    /// Takes ownership of a graph handle.
    ///
    /// # Safety
    /// `raw` must be a live graph of `ctx`'s context that nothing else destroys, and
    /// `record.keep` must hold everything its nodes point at.
    pub(crate) unsafe fn from_raw(
        ctx: &Arc<Context>,
        raw: sys::CUgraph,
        record: CaptureRecord,
    ) -> Graph {
        let (mut keep, mut keep_keys) = (Vec::new(), KeySet::default());
        extend_keep(&mut keep, &mut keep_keys, record.keep);
        let captured = !record.kernel_nodes.is_empty() || !record.kernel_nodes_complete;
        Graph {
            handle: Arc::new(GraphHandle {
                ctx: ctx.clone(),
                raw,
                id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
                lock: Mutex::new(()),
            }),
            keep,
            keep_keys,
            checked: Checked::new(),
            kernel_order: captured.then_some((record.kernel_nodes, record.kernel_nodes_complete)),
            bodies: Vec::new(),
            loops: loops::LoopNodes::default(),
            zeroing: AtomicBool::new(false),
        }
    }

    /// The raw handle (owned by this graph).
    pub(crate) fn raw(&self) -> sys::CUgraph {
        self.handle.raw
    }

    /// The graph's process-unique id.
    pub(crate) fn id(&self) -> u64 {
        self.handle.id
    }

    /// What the graph keeps alive.
    pub(crate) fn keep(&self) -> &[Keep] {
        &self.keep
    }

    #[inline]
    fn node(&self, raw: sys::CUgraphNode) -> NodeRef {
        NodeRef {
            graph: self.handle.id,
            raw,
        }
    }

    fn own(&self, call: &'static str, nodes: &[NodeRef]) -> Result<RawDeps> {
        if nodes.iter().any(|n| n.graph != self.handle.id) {
            return Err(Error::invalid(
                call,
                "a dependency is a node of another graph",
            ));
        }
        Ok(RawDeps::new(nodes))
    }

    /// Every node, in the driver's order, with its kind.
    pub(crate) fn nodes(&self) -> Result<Vec<(NodeRef, CUgraphNodeType)>> {
        let d = self.handle.ctx.bind()?;
        let _guard = self.handle.lock();
        let mut count = 0;
        // SAFETY: a live graph; a null node array asks for the count only.
        check("cuGraphGetNodes", unsafe {
            (d.cuGraphGetNodes)(self.handle.raw, std::ptr::null_mut(), &mut count)
        })?;
        let mut raw = vec![std::ptr::null_mut(); count];
        // SAFETY: `raw` has room for `count` handles; the driver writes at most that many and
        // stores the number written in `count`.
        check("cuGraphGetNodes", unsafe {
            (d.cuGraphGetNodes)(self.handle.raw, raw.as_mut_ptr(), &mut count)
        })?;
        raw.truncate(count);
        raw.into_iter()
            .map(|node| {
                let mut kind = CUgraphNodeType::EMPTY;
                // SAFETY: a node of this live graph (just listed) and a valid out-pointer.
                check("cuGraphNodeGetType", unsafe {
                    (d.cuGraphNodeGetType)(node, &mut kind)
                })?;
                Ok((self.node(node), kind))
            })
            .collect()
    }

    /// The number of nodes.
    pub(crate) fn node_count(&self) -> Result<usize> {
        let d = self.handle.ctx.bind()?;
        let mut count = 0;
        let _guard = self.handle.lock();
        // SAFETY: a live graph; a null node array asks for the count only.
        check("cuGraphGetNodes", unsafe {
            (d.cuGraphGetNodes)(self.handle.raw, std::ptr::null_mut(), &mut count)
        })?;
        Ok(count)
    }

    /// The kernel nodes, in the driver's order, with the function and geometry of each.
    pub(crate) fn kernel_nodes(&self) -> Result<Vec<KernelNodeInfo>> {
        let nodes = self.nodes()?;
        let d = self.handle.ctx.bind()?;
        let _guard = self.handle.lock();
        nodes
            .into_iter()
            .filter(|(_, kind)| *kind == CUgraphNodeType::KERNEL)
            .map(|(node, _)| {
                // SAFETY: the all-zero pattern is valid for this C struct of integers and
                // pointers.
                let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
                // SAFETY: a kernel node of this live graph and a valid out-pointer.
                check("cuGraphKernelNodeGetParams", unsafe {
                    (d.cuGraphKernelNodeGetParams)(node.raw, &mut p)
                })?;
                Ok(KernelNodeInfo {
                    node,
                    function: FunctionId::of(p.func),
                    config: LaunchConfig {
                        grid: (p.gridDimX, p.gridDimY, p.gridDimZ).into(),
                        block: (p.blockDimX, p.blockDimY, p.blockDimZ).into(),
                        shared_mem_bytes: p.sharedMemBytes,
                    },
                })
            })
            .collect()
    }

    /// The kernel nodes of a captured graph in the order their launches were enqueued. Our
    /// own launches record their nodes during the capture; kernel nodes added by other code
    /// (a library called inside the capture) are left out, in whatever order. A graph built
    /// node by node, or captured without our launches, gives [`Graph::kernel_nodes`]. It is an
    /// error when one of our launches' nodes could not be identified.
    pub(crate) fn kernel_nodes_in_launch_order(&self) -> Result<Vec<KernelNodeInfo>> {
        let all = self.kernel_nodes()?;
        let Some((order, complete)) = &self.kernel_order else {
            return Ok(all);
        };
        let unidentified = || {
            Error::invalid(
                "Graph::kernel_nodes_in_launch_order",
                "a kernel launch of the capture could not be matched with a kernel node of the \
                 graph (the driver did not report the node it added)",
            )
        };
        if !complete {
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

    /// Adds a node that does nothing, after `dependencies`, to `scope`: a join point.
    pub(crate) fn add_empty_node(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
    ) -> Result<NodeRef> {
        const CALL: &str = "Graph::add_empty_node";
        let deps = self.own(CALL, dependencies)?;
        let target = self.scope_raw(CALL, scope)?;
        let d = self.handle.ctx.bind()?;
        let _guard = self.handle.lock();
        let mut node = std::ptr::null_mut();
        // SAFETY: a live graph (or body of it), nodes of it (checked), and a valid
        // out-pointer.
        check("cuGraphAddEmptyNode", unsafe {
            (d.cuGraphAddEmptyNode)(&mut node, target, deps.as_ptr(), deps.len())
        })?;
        Ok(self.node(node))
    }

    /// Adds a launch of `function` with `args` after `dependencies`; the graph keeps the
    /// buffers and the module alive. The caller validated `config` and vouched for the
    /// arguments, as for a launch.
    ///
    /// A graph build adds one of these per launch, so this is the build's hot path: one pass
    /// over the dependencies, a comparison per module and buffer checked before (a lookup
    /// the first time), one bind, one lock, one driver call.
    pub(crate) fn add_kernel_node(
        &mut self,
        scope: usize,
        dependencies: impl ExactSizeIterator<Item = NodeRef>,
        function: &Function,
        config: &LaunchConfig,
        args: &impl CudaArgs,
    ) -> Result<NodeRef> {
        const CALL: &str = "Graph::add_kernel_node";
        let (id, mut foreign_node) = (self.handle.id, false);
        let deps = RawDeps::collect(dependencies.map(|n| {
            foreign_node |= n.graph != id;
            n.raw
        }));
        if foreign_node {
            return Err(Error::invalid(
                CALL,
                "a dependency is a node of another graph",
            ));
        }
        let deps: &[sys::CUgraphNode] = &deps;
        let target = self.scope_raw(CALL, scope)?;
        // Checked once per graph: later nodes naming the same module and buffers compare a
        // pointer each. What is new is kept before the driver sees it (kept needlessly, for
        // the graph's life, if the add then fails).
        let ctx = self.handle.ctx.raw();
        if let Some(new) = check_node(
            CALL,
            &mut self.checked,
            &self.keep_keys,
            ctx,
            function,
            args,
        )? {
            extend_keep(&mut self.keep, &mut self.keep_keys, new);
        }
        let d = self.handle.ctx.bind()?;
        let handle = &self.handle;
        let raw = with_node_params(function, config, args, |params| {
            let _guard = handle.lock();
            let mut node = std::ptr::null_mut();
            // SAFETY: a live graph (or body of it), nodes of it (their graph ids were checked
            // above), and parameters whose argument pointers are valid for this call (the
            // driver copies the values); what they point at is kept by the graph (above) for
            // its life.
            check("cuGraphAddKernelNode", unsafe {
                (d.cuGraphAddKernelNode)(&mut node, target, deps.as_ptr(), deps.len(), params)
            })?;
            Ok(node)
        })?;
        Ok(self.node(raw))
    }

    /// Makes `to` run after `from` (two nodes of `scope`).
    pub(crate) fn add_dependency(
        &mut self,
        scope: usize,
        from: &NodeRef,
        to: &NodeRef,
    ) -> Result<()> {
        const CALL: &str = "Graph::add_dependency";
        let ends = self.own(CALL, &[*from, *to])?;
        let target = self.scope_raw(CALL, scope)?;
        let d = self.handle.ctx.bind()?;
        let _guard = self.handle.lock();
        // SAFETY: a live graph (or body of it) and two of its nodes, one edge.
        check("cuGraphAddDependencies", unsafe {
            (d.cuGraphAddDependencies)(target, &ends[0], &ends[1], 1)
        })
    }

    /// The graph in Graphviz DOT form, as the driver writes it (verbose).
    pub(crate) fn to_dot(&self) -> Result<String> {
        const CALL: &str = "Graph::to_dot";
        let path = dot_temp_path(&std::env::temp_dir(), std::process::id(), next_dot_serial());
        let cpath = CString::new(path.to_string_lossy().into_owned())
            .map_err(|_| Error::invalid(CALL, "the temporary directory's path contains a NUL"))?;
        let d = self.handle.ctx.bind()?;
        let code = {
            let _guard = self.handle.lock();
            // SAFETY: a live graph and a NUL-terminated path.
            unsafe {
                (d.cuGraphDebugDotPrint)(
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

    /// Notes that memory its nodes use is being zeroed on the legacy stream
    /// (`DeviceMemory::alloc_zeroing`): no instantiation or update from this graph is
    /// returned before that memset has run.
    pub(crate) fn zeroed_on_legacy(&self) {
        self.zeroing.store(true, Ordering::Release);
    }

    /// Waits for the zeroing [`zeroed_on_legacy`](Graph::zeroed_on_legacy) noted, if any
    /// (once: later calls return at once).
    pub(crate) fn settle_zeroing(&self) -> Result<()> {
        if self.zeroing.load(Ordering::Acquire) {
            super::memory::settle_legacy_zeroing(&self.handle.ctx)?;
            self.zeroing.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// Instantiates the graph: the executable graph is a snapshot that holds what the graph
    /// holds.
    pub(crate) fn instantiate(&self) -> Result<GraphExec> {
        self.order_loops()?;
        let d = self.handle.ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        {
            let _guard = self.handle.lock();
            // SAFETY: a live graph and a valid out-pointer; no flags.
            check("cuGraphInstantiateWithFlags", unsafe {
                (d.cuGraphInstantiateWithFlags)(&mut raw, self.handle.raw, 0)
            })?;
        }
        let lane = self
            .loops
            .has_loop()
            .then(|| lane::LoopLane::of(&self.handle.ctx));
        let exec = GraphExec::new(raw, self.handle.clone(), &self.keep, lane);
        // Its nodes point at memory being zeroed: waited for after the instantiation, which
        // the memset ran beside, so this rarely waits. On failure the instantiation is dropped
        // unlaunched.
        self.settle_zeroing()?;
        Ok(exec)
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Graph")
            .field("raw", &self.handle.raw)
            .field("keep", &self.keep.len())
            .finish()
    }
}

/// An executable graph.
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
    fn dot_paths_are_unique_per_process_and_call() {
        let dir = Path::new("/tmp");
        assert_eq!(
            dot_temp_path(dir, 42, 7),
            Path::new("/tmp/gpu-pipeline-graph-42-7.dot")
        );
        assert_ne!(dot_temp_path(dir, 42, 7), dot_temp_path(dir, 42, 8));
        assert_ne!(next_dot_serial(), next_dot_serial());
    }

    #[test]
    fn dependencies_keep_their_order_inline_and_past_it() {
        let nodes: Vec<NodeRef> = (1..=INLINE_DEPS + 2)
            .map(|k| NodeRef {
                graph: 1,
                raw: std::ptr::without_provenance_mut(k * 8),
            })
            .collect();
        for len in 0..=nodes.len() {
            let deps = RawDeps::new(&nodes[..len]);
            assert_eq!(
                matches!(deps, RawDeps::Inline(..)),
                len <= INLINE_DEPS,
                "{len}"
            );
            let raw: Vec<sys::CUgraphNode> = nodes[..len].iter().map(|n| n.raw).collect();
            assert_eq!(&*deps, &raw[..], "{len}");
        }
    }
}
