//! Building graphs node by node: copies, memsets, host functions, stream memory operations,
//! event record and wait nodes, child graphs, work captured into the graph, plus clone and
//! the edge queries. Each node's add keeps what it points at for the graph's whole life, as
//! a capture does (`keep.rs`).

use super::*;
use crate::driver::Driver;

use super::super::capture;
use super::super::host_fn::host_node_params;
use super::super::{DeviceRange, Event, MemOp, PinnedRange};

/// One end of a copy node.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CopyEnd<'a> {
    /// Device (or managed) memory.
    Device(DeviceRange<'a>),
    /// Pinned host memory.
    Pinned(PinnedRange<'a>),
}

impl CopyEnd<'_> {
    fn bytes(&self) -> usize {
        match self {
            CopyEnd::Device(r) => r.bytes,
            CopyEnd::Pinned(r) => r.bytes,
        }
    }

    fn context(&self) -> sys::CUcontext {
        match self {
            CopyEnd::Device(r) => r.memory.context().raw(),
            CopyEnd::Pinned(r) => r.memory.context().raw(),
        }
    }

    fn fits(&self) -> bool {
        match self {
            CopyEnd::Device(r) => r
                .offset
                .checked_add(r.bytes)
                .is_some_and(|end| end <= r.memory.bytes()),
            CopyEnd::Pinned(r) => r
                .offset
                .checked_add(r.bytes)
                .is_some_and(|end| end <= r.memory.bytes()),
        }
    }

    fn keep(&self) -> Keep {
        match self {
            CopyEnd::Device(r) => Keep::Device(r.memory.clone()),
            CopyEnd::Pinned(r) => Keep::Pinned(r.memory.clone()),
        }
    }
}

impl Graph {
    /// The raw graph a scope names: 0 is the graph itself, `k` the body of its `k`-th
    /// conditional node.
    #[inline]
    pub(crate) fn scope_raw(&self, call: &'static str, scope: usize) -> Result<sys::CUgraph> {
        match scope {
            0 => Ok(self.handle.raw),
            k => self.bodies.get(k - 1).copied().ok_or_else(|| {
                Error::invalid(call, "the conditional body belongs to another graph")
            }),
        }
    }

    /// The scope whose raw graph is `target` (0 unless it is a body).
    pub(super) fn scope_of(&self, target: sys::CUgraph) -> usize {
        self.bodies
            .iter()
            .position(|&body| body == target)
            .map_or(0, |k| k + 1)
    }

    /// Whether the graph has conditional nodes (which rule out clones, child-graph use and a
    /// second executable graph).
    pub(crate) fn has_conditional_nodes(&self) -> bool {
        !self.bodies.is_empty()
    }

    /// Keeps `items` for the graph's whole life.
    pub(crate) fn retain(&mut self, items: impl IntoIterator<Item = Keep>) {
        extend_keep(&mut self.keep, &mut self.keep_keys, items);
    }

    /// Adds one node to `scope` after `dependencies` with `add` (which gets the driver, the
    /// target graph, the dependencies and the out-pointer, under the graph's lock), then
    /// keeps `keep`.
    fn add_node(
        &mut self,
        call: &'static str,
        symbol: &'static str,
        scope: usize,
        dependencies: &[NodeRef],
        keep: impl IntoIterator<Item = Keep>,
        add: impl FnOnce(&Driver, sys::CUgraph, &[sys::CUgraphNode], &mut sys::CUgraphNode) -> CUresult,
    ) -> Result<NodeRef> {
        let deps = self.own(call, dependencies)?;
        let target = self.scope_raw(call, scope)?;
        let d = self.handle.ctx.bind()?;
        let mut node = std::ptr::null_mut();
        {
            let _guard = self.handle.lock();
            check(symbol, add(d, target, &deps, &mut node))?;
        }
        // Kept before any executable graph can exist: none can until this returns.
        self.retain(keep);
        Ok(self.node(node))
    }

    /// Adds a copy of `src` to `dst` (as many bytes) to `scope`.
    pub(crate) fn add_copy(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        src: CopyEnd<'_>,
        dst: CopyEnd<'_>,
    ) -> Result<NodeRef> {
        const CALL: &str = "Graph::add_copy_node";
        let ctx = self.handle.ctx.raw();
        if src.context() != ctx || dst.context() != ctx {
            return Err(Error::mismatch(
                CALL,
                "a buffer of the copy belongs to another context than the graph",
            ));
        }
        if !src.fits() || !dst.fits() || src.bytes() != dst.bytes() {
            return Err(Error::invalid(
                CALL,
                "the copy's ranges differ in length or lie outside their buffers",
            ));
        }
        // SAFETY: the all-zero pattern is valid for this C struct of integers and pointers
        // (and is what the driver wants in every field we do not set).
        let mut p: sys::CUDA_MEMCPY3D = unsafe { std::mem::zeroed() };
        let bytes = src.bytes();
        match src {
            CopyEnd::Device(r) => {
                p.srcMemoryType = sys::CU_MEMORYTYPE_DEVICE;
                p.srcDevice = r.ptr();
            }
            // Inside a conditional body the copy must name device-mapped memory: pinned memory
            // goes by its unified address there (page-locked memory is mapped under UVA).
            CopyEnd::Pinned(r) if scope != 0 => {
                p.srcMemoryType = sys::CU_MEMORYTYPE_UNIFIED;
                p.srcDevice = r.memory.addr(r.offset) as sys::CUdeviceptr;
            }
            CopyEnd::Pinned(r) => {
                p.srcMemoryType = sys::CU_MEMORYTYPE_HOST;
                p.srcHost = r.memory.addr(r.offset).cast_const().cast();
            }
        }
        match dst {
            CopyEnd::Device(r) => {
                p.dstMemoryType = sys::CU_MEMORYTYPE_DEVICE;
                p.dstDevice = r.ptr();
            }
            CopyEnd::Pinned(r) if scope != 0 => {
                p.dstMemoryType = sys::CU_MEMORYTYPE_UNIFIED;
                p.dstDevice = r.memory.addr(r.offset) as sys::CUdeviceptr;
            }
            CopyEnd::Pinned(r) => {
                p.dstMemoryType = sys::CU_MEMORYTYPE_HOST;
                p.dstHost = r.memory.addr(r.offset).cast();
            }
        }
        (p.srcPitch, p.dstPitch, p.WidthInBytes, p.Height, p.Depth) = (bytes, bytes, bytes, 1, 1);
        let keep = [src.keep(), dst.keep()];
        self.add_node(
            CALL,
            "cuGraphAddMemcpyNode",
            scope,
            dependencies,
            keep,
            |d, g, deps, node| {
                // SAFETY: a live graph of `ctx` and nodes of it; a one-dimensional copy between
                // in-bounds ranges (checked) of live allocations of `ctx`, which the graph keeps
                // for its whole life (`keep`); the driver copies the parameters.
                unsafe { (d.cuGraphAddMemcpyNode)(node, g, deps.as_ptr(), deps.len(), &p, ctx) }
            },
        )
    }

    /// Adds a memset of `dst`'s elements of `element_size` bytes (1, 2 or 4) to `value`.
    pub(crate) fn add_memset(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        dst: DeviceRange<'_>,
        value: u32,
        element_size: u32,
    ) -> Result<NodeRef> {
        const CALL: &str = "Graph::add_memset_node";
        let ctx = self.handle.ctx.raw();
        if dst.memory.context().raw() != ctx {
            return Err(Error::mismatch(
                CALL,
                "the buffer belongs to another context than the graph",
            ));
        }
        let fits = dst
            .offset
            .checked_add(dst.bytes)
            .is_some_and(|end| end <= dst.memory.bytes());
        let size = element_size as usize;
        if !matches!(element_size, 1 | 2 | 4) || !fits || !dst.bytes.is_multiple_of(size) {
            return Err(Error::invalid(
                CALL,
                format!(
                    "a memset of {element_size}-byte elements over {} bytes at offset {} of a \
                     {}-byte buffer",
                    dst.bytes,
                    dst.offset,
                    dst.memory.bytes()
                ),
            ));
        }
        let p = sys::CUDA_MEMSET_NODE_PARAMS {
            dst: dst.ptr(),
            pitch: 0,
            value,
            elementSize: element_size,
            width: dst.bytes / size,
            height: 1,
        };
        let keep = [Keep::Device(dst.memory.clone())];
        self.add_node(
            CALL,
            "cuGraphAddMemsetNode",
            scope,
            dependencies,
            keep,
            |d, g, deps, node| {
                // SAFETY: a live graph of `ctx` and nodes of it; an in-bounds range (checked) of a
                // live allocation of `ctx`, kept for the graph's life; parameters copied.
                unsafe { (d.cuGraphAddMemsetNode)(node, g, deps.as_ptr(), deps.len(), &p, ctx) }
            },
        )
    }

    /// Adds a host node running `f` at every launch; a panic in it is reported by the stream
    /// that launched the graph.
    pub(crate) fn add_host(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        f: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<NodeRef> {
        let (p, keep) = host_node_params(f);
        self.add_node(
            "Graph::add_host_node",
            "cuGraphAddHostNode",
            scope,
            dependencies,
            keep,
            |d, g, deps, node| {
                // SAFETY: a live graph and nodes of it; the trampoline only borrows the
                // closure `p` points at, which `keep` holds for the graph's life (and every
                // executable graph holds a copy of that list).
                unsafe { (d.cuGraphAddHostNode)(node, g, deps.as_ptr(), deps.len(), &p) }
            },
        )
    }

    /// Adds a node running stream memory operations on flag words, in order.
    pub(crate) fn add_mem_ops(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        ops: &[MemOp<'_>],
    ) -> Result<NodeRef> {
        const CALL: &str = "Graph::add_mem_op_node";
        let mut params: Vec<sys::CUstreamBatchMemOpParams> =
            ops.iter().map(MemOp::encode).collect();
        let count = u32::try_from(params.len())
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| Error::invalid(CALL, "give between 1 and u32::MAX operations"))?;
        let keep: Vec<Keep> = ops
            .iter()
            .filter_map(MemOp::word)
            .map(|w| Keep::Object(w.clone()))
            .collect();
        let ctx = self.handle.ctx.raw();
        let p = sys::CUDA_BATCH_MEM_OP_NODE_PARAMS {
            ctx,
            count,
            paramArray: params.as_mut_ptr(),
            flags: 0,
        };
        self.add_node(
            CALL,
            "cuGraphAddBatchMemOpNode",
            scope,
            dependencies,
            keep,
            |d, g, deps, node| {
                // SAFETY: a live graph and nodes of it; `count` encoded operations on the device
                // addresses of live flag words (FlagWord's invariant) that the graph keeps; the
                // driver copies the array during the call.
                unsafe { (d.cuGraphAddBatchMemOpNode)(node, g, deps.as_ptr(), deps.len(), &p) }
            },
        )
    }

    /// Adds an event record (`wait == false`) or wait node; `keep` holds the event for the
    /// graph's life.
    pub(crate) fn add_event_node(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        event: &Event,
        wait: bool,
        keep: Keep,
    ) -> Result<NodeRef> {
        const CALL: &str = "Graph::add_event_node";
        if event.context().raw() != self.handle.ctx.raw() {
            return Err(Error::mismatch(
                CALL,
                "the event belongs to another context than the graph",
            ));
        }
        let raw = event.raw();
        let symbol = if wait {
            "cuGraphAddEventWaitNode"
        } else {
            "cuGraphAddEventRecordNode"
        };
        self.add_node(
            CALL,
            symbol,
            scope,
            dependencies,
            [keep],
            |d, g, deps, node| {
                let add = if wait {
                    d.cuGraphAddEventWaitNode
                } else {
                    d.cuGraphAddEventRecordNode
                };
                // SAFETY: a live graph and nodes of it, and a live event of its context, which
                // `keep` holds for the graph's life.
                unsafe { add(node, g, deps.as_ptr(), deps.len(), raw) }
            },
        )
    }

    /// Adds a node running a copy of `child` (the driver clones it now; later edits of
    /// `child` do not reach the node). The graph keeps what `child` keeps.
    pub(crate) fn add_child_graph(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        child: &Graph,
    ) -> Result<NodeRef> {
        const CALL: &str = "Graph::add_child_graph_node";
        if child.handle.ctx.raw() != self.handle.ctx.raw() {
            return Err(Error::mismatch(
                CALL,
                "the child graph belongs to another context than the graph",
            ));
        }
        if child.has_conditional_nodes() {
            return Err(Error::invalid(
                CALL,
                "a graph with conditional nodes (device `while`/`if`) cannot be a child graph \
                 (a CUDA rule); add its nodes to this graph instead",
            ));
        }
        let keep = child.keep.clone();
        let child_guard = child.handle.lock();
        let raw = child.handle.raw;
        let node = self.add_node(
            CALL,
            "cuGraphAddChildGraphNode",
            scope,
            dependencies,
            keep,
            |d, g, deps, node| {
                // SAFETY: two live graphs of one context (checked), the child locked against
                // concurrent edits while the driver clones it.
                unsafe { (d.cuGraphAddChildGraphNode)(node, g, deps.as_ptr(), deps.len(), raw) }
            },
        );
        drop(child_guard);
        // The node's copy points at what `child` points at, zeroed or not yet.
        if child.zeroing.load(Ordering::Acquire) {
            self.zeroed_on_legacy();
        }
        node
    }

    /// Starts capturing `stream`'s work into `scope` after `dependencies`.
    pub(crate) fn begin_capture_into(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        stream: &Stream,
        mode: sys::CUstreamCaptureMode,
    ) -> Result<()> {
        const CALL: &str = "Graph::capture_into";
        let deps = self.own(CALL, dependencies)?;
        let target = self.scope_raw(CALL, scope)?;
        if stream.context().raw() != self.handle.ctx.raw() {
            return Err(Error::mismatch(
                CALL,
                "the stream belongs to another context than the graph",
            ));
        }
        // SAFETY: a live graph of the stream's context and nodes of it; `&mut self` keeps
        // every other edit of the graph out until `end_capture_into`.
        unsafe { capture::begin_to_graph(stream, target, &deps, mode) }
    }

    /// Ends the capture begun by [`Graph::begin_capture_into`]: keeps what the captured work
    /// points at, and returns the nodes it ends with.
    pub(crate) fn end_capture_into(&mut self, stream: &Stream) -> Result<Vec<NodeRef>> {
        let (sinks, record) = capture::end_to_graph(stream)?;
        self.retain(record.keep);
        Ok(sinks.into_iter().map(|raw| self.node(raw)).collect())
    }

    /// A copy of the graph (`cuGraphClone`), keeping what this one keeps. Its nodes are new
    /// nodes: handles of this graph's nodes do not name them.
    pub(crate) fn try_clone(&self) -> Result<Graph> {
        if self.has_conditional_nodes() {
            return Err(Error::invalid(
                "Graph::try_clone",
                "a graph with conditional nodes (device `while`/`if`) cannot be cloned (a CUDA \
                 rule); build it again",
            ));
        }
        let d = self.handle.ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        {
            let _guard = self.handle.lock();
            // SAFETY: a live graph and a valid out-pointer.
            check("cuGraphClone", unsafe {
                (d.cuGraphClone)(&mut raw, self.handle.raw)
            })?;
        }
        let record = CaptureRecord {
            keep: self.keep.clone(),
            kernel_nodes: Vec::new(),
            kernel_nodes_complete: true,
        };
        // SAFETY: a new graph of this context that we own, whose nodes point at what
        // `record.keep` (a copy of this graph's list) holds.
        let clone = unsafe { Graph::from_raw(&self.handle.ctx, raw, record) };
        // Its nodes point at the same memory, zeroed or not yet.
        if self.zeroing.load(Ordering::Acquire) {
            clone.zeroed_on_legacy();
        }
        Ok(clone)
    }

    /// [`Graph::try_clone`], with the nodes of the clone that `nodes` (of this graph) became
    /// (`cuGraphNodeFindInClone`), in the same order.
    pub(crate) fn try_clone_with(&self, nodes: &[NodeRef]) -> Result<(Graph, Vec<NodeRef>)> {
        const CALL: &str = "Graph::try_clone_with_nodes";
        let own = self.own(CALL, nodes)?;
        let clone = self.try_clone()?;
        let d = self.handle.ctx.bind()?;
        let original_guard = self.handle.lock();
        let clone_guard = clone.handle.lock();
        let mapped = own
            .iter()
            .map(|&original| {
                let mut node = std::ptr::null_mut();
                // SAFETY: a node of this live graph (checked by `own`), the live clone made
                // from it, and a valid out-pointer.
                check("cuGraphNodeFindInClone", unsafe {
                    (d.cuGraphNodeFindInClone)(&mut node, original, clone.handle.raw)
                })?;
                Ok(clone.node(node))
            })
            .collect::<Result<Vec<_>>>()?;
        drop((original_guard, clone_guard));
        Ok((clone, mapped))
    }

    /// The edges of `scope`, as (from, to) pairs.
    pub(super) fn edges(&self, scope: usize) -> Result<Vec<(sys::CUgraphNode, sys::CUgraphNode)>> {
        const CALL: &str = "Graph::edges";
        let target = self.scope_raw(CALL, scope)?;
        let d = self.handle.ctx.bind()?;
        let _guard = self.handle.lock();
        let mut count = 0;
        // SAFETY: a live graph; null arrays ask for the count only.
        check("cuGraphGetEdges", unsafe {
            (d.cuGraphGetEdges)(
                target,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut count,
            )
        })?;
        // The driver refuses arrays of no room (CUDA_ERROR_INVALID_VALUE on a 580 driver).
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut from = vec![std::ptr::null_mut(); count];
        let mut to = vec![std::ptr::null_mut(); count];
        // SAFETY: both arrays have room for `count` handles; the driver writes at most that
        // many and stores the number written in `count`.
        check("cuGraphGetEdges", unsafe {
            (d.cuGraphGetEdges)(target, from.as_mut_ptr(), to.as_mut_ptr(), &mut count)
        })?;
        Ok(from.into_iter().zip(to).take(count).collect())
    }

    /// How many edges `scope` has (not counting those inside conditional bodies or child
    /// graphs).
    pub(crate) fn edge_count(&self, scope: usize) -> Result<usize> {
        let target = self.scope_raw("Graph::edge_count", scope)?;
        let d = self.handle.ctx.bind()?;
        let _guard = self.handle.lock();
        let mut count = 0;
        // SAFETY: a live graph; null arrays ask for the count only.
        check("cuGraphGetEdges", unsafe {
            (d.cuGraphGetEdges)(
                target,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut count,
            )
        })?;
        Ok(count)
    }

    /// The nodes of `scope` that no node of it depends on, in the driver's node order.
    pub(crate) fn sinks(&self, scope: usize) -> Result<Vec<NodeRef>> {
        const CALL: &str = "Graph::sinks";
        let edges = self.edges(scope)?;
        let raw = self.scope_nodes(CALL, scope)?;
        let sources: HashSet<usize> = edges.iter().map(|(from, _)| *from as usize).collect();
        Ok(raw
            .into_iter()
            .filter(|n| !sources.contains(&(*n as usize)))
            .map(|n| self.node(n))
            .collect())
    }

    /// The nodes of `scope` (not those inside its conditional bodies), in the driver's order.
    pub(super) fn scope_nodes(
        &self,
        call: &'static str,
        scope: usize,
    ) -> Result<Vec<sys::CUgraphNode>> {
        let target = self.scope_raw(call, scope)?;
        let d = self.handle.ctx.bind()?;
        let _guard = self.handle.lock();
        let mut count = 0;
        // SAFETY: a live graph; a null node array asks for the count only.
        check("cuGraphGetNodes", unsafe {
            (d.cuGraphGetNodes)(target, std::ptr::null_mut(), &mut count)
        })?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut raw = vec![std::ptr::null_mut(); count];
        // SAFETY: `raw` has room for `count` handles.
        check("cuGraphGetNodes", unsafe {
            (d.cuGraphGetNodes)(target, raw.as_mut_ptr(), &mut count)
        })?;
        raw.truncate(count);
        Ok(raw)
    }
}
