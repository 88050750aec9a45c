//! Building graphs node by node, with explicit dependencies, on both backends: kernels,
//! copies, memsets, host functions, stream memory operations, event record and wait nodes,
//! child graphs, work captured from a stream into the graph, and device-side `while` / `if`
//! nodes whose bodies ([`GraphBody`]) are built the same way.
//!
//! Lifetimes follow captured graphs: every node keeps what it points at (buffers, modules,
//! closures, events, flag words) for the graph's whole life, and every executable graph made
//! from it keeps a copy of that list. Adding a node borrows its buffers only for the call, as
//! a capture does.
//!
//! A node belongs to one *scope*: the graph itself, or the body of one conditional node. Its
//! dependencies must be nodes of the same scope. On the CPU backend an edge goes from a node
//! added earlier to one added later (the order a replay runs nodes in).

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;

use bytemuck::Pod;

use super::control::Test;
use super::kernel_set::{ConditionHandle, HandleKind, Owner};
use super::{
    CaptureMode, Condition, Graph, GraphBackend, GraphNode, GraphNodeType, KernelIdentity,
    KernelNode, LoopState, NodeId, Scope,
};
use crate::context::Context;
use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::event::{Event, EventBackend};
use crate::launch::{CudaArgsOf, KernelArgsFor, LaunchConfig, Signature, TypedKernel, cpu_args};
use crate::memory::check as args;
use crate::memory::flag::FlagStorage;
use crate::memory::view::{DeviceRegion, PinnedRegion};
use crate::memory::{DeviceDest, DeviceSource, PinnedDest, PinnedSource};
use crate::module::KernelBackend;
use crate::stream::{MemOp, Stream, StreamBackend, mixed};
use crate::sys;

mod conditional;
mod kernel;
mod node_methods;

use node_methods::{body_graph, graph_itself, shared_node_methods};

/// Why a node is refused whose dependency is not a node of its scope.
const FOREIGN_DEPENDENCY: &str = "a dependency is a node of another graph, or of another \
     conditional body (dependencies must be nodes of the graph or body the node is added to)";

/// A node's dependencies, resolved for the graph's backend.
enum Deps {
    Cuda(InlineDeps<cuda::NodeRef>),
    Cpu(InlineDeps<usize>),
}

/// How many dependencies [`InlineDeps`] holds without allocating.
const INLINE_DEPS: usize = 4;

/// Dependencies held on the stack up to [`INLINE_DEPS`], so a node in a chain (one
/// dependency) allocates nothing.
enum InlineDeps<T: Copy> {
    /// The first `len` entries (the rest repeat the first, as filler).
    Inline([T; INLINE_DEPS], usize),
    Heap(Vec<T>),
}

impl<T: Copy> InlineDeps<T> {
    /// The `count` items of `items`, in order.
    fn new(mut items: impl Iterator<Item = T>, count: usize) -> InlineDeps<T> {
        match items.next() {
            Some(first) if count <= INLINE_DEPS => {
                let mut inline = [first; INLINE_DEPS];
                let mut len = 1;
                for (slot, item) in inline[1..].iter_mut().zip(items) {
                    *slot = item;
                    len += 1;
                }
                InlineDeps::Inline(inline, len)
            }
            Some(first) => InlineDeps::Heap(std::iter::once(first).chain(items).collect()),
            // An empty vector does not allocate.
            None => InlineDeps::Heap(Vec::new()),
        }
    }
}

impl<T: Copy> std::ops::Deref for InlineDeps<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            InlineDeps::Inline(items, len) => &items[..*len],
            InlineDeps::Heap(items) => items,
        }
    }
}

/// One end of a copy.
#[derive(Clone, Copy)]
enum End<'a> {
    Device(DeviceRegion<'a>),
    Pinned(PinnedRegion<'a>),
}

impl<'a> End<'a> {
    fn ctx(&self) -> &Context {
        match self {
            End::Device(r) => &r.alloc.ctx,
            End::Pinned(r) => &r.alloc.ctx,
        }
    }

    fn len(&self) -> usize {
        match self {
            End::Device(r) => r.len,
            End::Pinned(r) => r.len,
        }
    }

    fn cuda(&self) -> Option<cuda::CopyEnd<'a>> {
        match self {
            End::Device(r) => r.cuda().map(cuda::CopyEnd::Device),
            End::Pinned(r) => r.cuda().map(cuda::CopyEnd::Pinned),
        }
    }

    fn cpu(&self) -> Option<cpu::Range> {
        match self {
            End::Device(r) => r.cpu(),
            End::Pinned(r) => r.cpu(),
        }
    }
}

/// A `while` node and the state its loop leaves behind.
///
/// ```
/// use gpu_pipeline::{Comparison, Condition, Context, DeviceBuffer, Graph, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut flag = DeviceBuffer::from_slice(&stream, &[1u32])?;
/// let mut done = DeviceBuffer::<u32>::alloc(&ctx, 1)?;
/// let mut graph = Graph::new(&ctx)?;
/// // While `flag[0] != 0`, at most 10 times: the body clears the flag, so it runs once.
/// let looping = graph.add_while_node(
///     &[],
///     Condition::compare(&flag, Comparison::NotEqual, 0u32).named("flag != 0"),
///     10,
///     |body| body.add_memset_u32_node(&[], &mut flag, 0).map(drop),
/// )?;
/// // Later nodes depend on the loop's node: they run once it has finished.
/// graph.add_memset_u32_node(&[looping.node()], &mut done, 7)?;
/// let exec = graph.instantiate()?;
/// exec.launch(&stream)?;
/// stream.synchronize()?;
/// assert_eq!(looping.state().iterations(), 1);
/// exec.check_loops()?; // no loop stopped at its maximum
/// drop((exec, graph));
/// assert_eq!(done.to_vec(&stream)?, [7]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct WhileNode {
    node: GraphNode,
    state: LoopState,
}

impl WhileNode {
    /// The conditional node (what later nodes depend on).
    pub fn node(&self) -> GraphNode {
        self.node
    }

    /// The loop's iteration count and limit mark, as its launches leave them.
    pub fn state(&self) -> &LoopState {
        &self.state
    }
}

/// The body of a `while` or `if` node, being built: the nodes a conditional body may hold
/// (kernels, copies, memsets, empty nodes and nested conditionals; CUDA allows no host
/// functions, event nodes or work of another context there). Dependencies are nodes of this
/// body; nodes nothing in the body depends on end the body.
///
/// ```
/// use gpu_pipeline::{Condition, Context, DeviceBuffer, Graph, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let go = DeviceBuffer::from_slice(&stream, &[1u32])?;
/// let mut a = DeviceBuffer::<u32>::alloc(&ctx, 4)?;
/// let mut b = DeviceBuffer::<u32>::alloc(&ctx, 4)?;
/// let mut graph = Graph::new(&ctx)?;
/// // Runs its body once when `go[0] != 0`: two memsets, then a join after both.
/// graph.add_if_node(&[], Condition::value(&go), |body| {
///     let first = body.add_memset_u32_node(&[], &mut a, 5)?;
///     let second = body.add_memset_u32_node(&[], &mut b, 6)?;
///     body.add_empty_node(&[first, second])?;
///     assert_eq!(body.edge_count()?, 2);
///     Ok(())
/// })?;
/// graph.instantiate()?.launch(&stream)?;
/// drop(graph);
/// assert_eq!((a.to_vec(&stream)?, b.to_vec(&stream)?), (vec![5; 4], vec![6; 4]));
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Debug)]
pub struct GraphBody<'g> {
    graph: &'g mut Graph,
    scope: u32,
}

impl Graph {
    fn scope_of(&self, call: &'static str, scope: u32) -> Result<Scope> {
        self.scope_ref(call, scope).cloned()
    }

    /// [`scope_of`](Self::scope_of) without the clone (a node added to a body of the CPU
    /// form would otherwise copy its path, and every node pay for the copy's code).
    #[inline]
    fn scope_ref(&self, call: &'static str, scope: u32) -> Result<&Scope> {
        if self.broken {
            return Err(Error::invalid(
                call,
                "building a conditional body of this graph failed earlier; build a new graph",
            ));
        }
        self.scopes
            .get(scope as usize)
            .ok_or_else(|| Error::invalid(call, "the scope belongs to another graph"))
    }

    /// `dependencies`, checked to be nodes of `scope` of this graph.
    fn deps(&self, call: &'static str, scope: u32, dependencies: &[GraphNode]) -> Result<Deps> {
        let mine = |n: &GraphNode| n.graph == self.id && n.scope == scope;
        if !dependencies.iter().all(mine) {
            return Err(Error::invalid(call, FOREIGN_DEPENDENCY));
        }
        let ids = dependencies.iter().map(|n| n.id);
        Ok(match &self.backend {
            GraphBackend::Cuda(_) => Deps::Cuda(InlineDeps::new(
                ids.filter_map(|id| match id {
                    NodeId::Cuda(n) => Some(n),
                    NodeId::Cpu(_) => None,
                }),
                dependencies.len(),
            )),
            GraphBackend::Cpu(_) => Deps::Cpu(InlineDeps::new(
                ids.filter_map(|id| match id {
                    NodeId::Cpu(n) => Some(n),
                    NodeId::Cuda(_) => None,
                }),
                dependencies.len(),
            )),
        })
    }

    #[inline]
    fn made(&self, scope: u32, kind: GraphNodeType, id: NodeId) -> GraphNode {
        GraphNode {
            graph: self.id,
            scope,
            kind,
            id,
        }
    }

    /// Adds a node built per backend: `cuda` gets the graph, the body index and the
    /// dependencies; `cpu` the graph, the path and the dependencies.
    fn add_with(
        &mut self,
        call: &'static str,
        scope: u32,
        dependencies: &[GraphNode],
        kind: GraphNodeType,
        cuda: impl FnOnce(&mut cuda::Graph, usize, &[cuda::NodeRef]) -> Result<cuda::NodeRef>,
        cpu: impl FnOnce(&mut cpu::Graph, &[usize], &[usize]) -> Result<usize>,
    ) -> Result<GraphNode> {
        self.scope_ref(call, scope)?;
        let deps = self.deps(call, scope, dependencies)?;
        // Disjoint fields: the backend changes, the scope is only read.
        let target = self.scopes.get(scope as usize);
        let id = match (&mut self.backend, target, deps) {
            (GraphBackend::Cuda(g), Some(Scope::Cuda(body)), Deps::Cuda(deps)) => {
                NodeId::Cuda(cuda(g, *body, &deps)?)
            }
            (GraphBackend::Cpu(g), Some(Scope::Cpu(path)), Deps::Cpu(deps)) => {
                NodeId::Cpu(cpu(g, path, &deps)?)
            }
            _ => return Err(mixed(call, "graph")),
        };
        Ok(self.made(scope, kind, id))
    }

    fn own_memory(&self, call: &'static str, ctx: &Context) -> Result<()> {
        if self.ctx.shares_memory_with(ctx) {
            Ok(())
        } else {
            Err(Error::mismatch(
                call,
                "the buffer belongs to another context than the graph",
            ))
        }
    }

    pub(super) fn add_empty_in(&mut self, scope: u32, deps: &[GraphNode]) -> Result<GraphNode> {
        self.add_with(
            "Graph::add_empty_node",
            scope,
            deps,
            GraphNodeType::EMPTY,
            |g, body, deps| g.add_empty_node(body, deps),
            |g, path, deps| Ok(g.add_empty(path, deps)?),
        )
    }

    fn add_copy_in(
        &mut self,
        call: &'static str,
        scope: u32,
        deps: &[GraphNode],
        src: End<'_>,
        dst: End<'_>,
        label: &'static str,
    ) -> Result<GraphNode> {
        args::same_len(call, src.len(), dst.len())?;
        self.own_memory(call, src.ctx())?;
        self.own_memory(call, dst.ctx())?;
        if src.len() == 0 {
            // A zero-length copy node is refused by the driver; an empty node orders the same.
            return self.add_empty_in(scope, deps);
        }
        self.add_with(
            call,
            scope,
            deps,
            GraphNodeType::MEMCPY,
            |g, body, deps| match (src.cuda(), dst.cuda()) {
                (Some(s), Some(d)) => g.add_copy(body, deps, s, d),
                _ => Err(mixed(call, "buffers")),
            },
            |g, path, deps| match (src.cpu(), dst.cpu()) {
                (Some(s), Some(d)) => {
                    let text = format!("{label} {} -> {}", s.describe(1), d.describe(1));
                    Ok(g.add_op(path, cpu::work::copy(text, s, d), deps)?)
                }
                _ => Err(mixed(call, "buffers")),
            },
        )
    }

    fn add_memset_in(
        &mut self,
        call: &'static str,
        scope: u32,
        deps: &[GraphNode],
        dst: DeviceRegion<'_>,
        value: u32,
        element_size: u32,
    ) -> Result<GraphNode> {
        self.own_memory(call, &dst.alloc.ctx)?;
        if dst.bytes == 0 {
            return self.add_empty_in(scope, deps);
        }
        self.add_with(
            call,
            scope,
            deps,
            GraphNodeType::MEMSET,
            |g, body, deps| match dst.cuda() {
                Some(range) => g.add_memset(body, deps, range, value, element_size),
                None => Err(mixed(call, "buffer")),
            },
            |g, path, deps| match dst.cpu() {
                Some(range) if element_size == 4 => {
                    let label = format!("memset_u32 {}", range.describe(4));
                    let op = cpu::work::memset_u32(label, range, value);
                    Ok(g.add_op(path, op, deps)?)
                }
                Some(range) => {
                    let label = format!("memset_u8 {}", range.describe(1));
                    let op = cpu::work::memset_u8(label, range, value as u8);
                    Ok(g.add_op(path, op, deps)?)
                }
                None => Err(mixed(call, "buffer")),
            },
        )
    }

    fn add_dependency_in(&mut self, scope: u32, from: &GraphNode, to: &GraphNode) -> Result<()> {
        const CALL: &str = "Graph::add_dependency";
        let target = self.scope_of(CALL, scope)?;
        let ends = self.deps(CALL, scope, &[*from, *to])?;
        match (&mut self.backend, target, ends) {
            (GraphBackend::Cuda(g), Scope::Cuda(body), Deps::Cuda(ends)) => {
                g.add_dependency(body, &ends[0], &ends[1])
            }
            (GraphBackend::Cpu(g), Scope::Cpu(path), Deps::Cpu(ends)) => {
                Ok(g.add_dependency(&path, ends[0], ends[1])?)
            }
            _ => Err(mixed(CALL, "graph")),
        }
    }

    fn edge_count_in(&self, scope: u32) -> Result<usize> {
        const CALL: &str = "Graph::edge_count";
        match (&self.backend, self.scopes.get(scope as usize)) {
            (GraphBackend::Cuda(g), Some(Scope::Cuda(body))) => g.edge_count(*body),
            (GraphBackend::Cpu(g), Some(Scope::Cpu(path))) => Ok(g.edge_count(path)?),
            _ => Err(Error::invalid(CALL, "the scope belongs to another graph")),
        }
    }
}

impl Graph {
    shared_node_methods!(graph_itself, |_: &Graph| 0u32);

    /// Adds a host node running `f` after `dependencies`, at every launch. `f` must not call
    /// CUDA (a driver rule); a panic in it is reported by the stream that launched the graph.
    pub fn add_host_node(
        &mut self,
        dependencies: &[GraphNode],
        f: impl Fn() + Send + Sync + 'static,
    ) -> Result<GraphNode> {
        let f: Arc<dyn Fn() + Send + Sync> = Arc::new(f);
        let cpu_f = f.clone();
        self.add_with(
            "Graph::add_host_node",
            0,
            dependencies,
            GraphNodeType::HOST,
            |g, body, deps| g.add_host(body, deps, f),
            |g, path, deps| Ok(g.add_op(path, cpu::work::host_fn(cpu_f), deps)?),
        )
    }

    /// Adds a node running stream memory operations on flag cells, in order (see
    /// [`Stream::batch_mem_op`](crate::Stream::batch_mem_op)). The graph keeps the cells.
    pub fn add_mem_op_node(
        &mut self,
        dependencies: &[GraphNode],
        ops: &[MemOp<'_>],
    ) -> Result<GraphNode> {
        const CALL: &str = "Graph::add_mem_op_node";
        if ops.is_empty() {
            return Err(Error::invalid(CALL, "give at least one operation"));
        }
        for op in ops {
            if let Some((ctx, _)) = op.cell()
                && !ctx.shares_memory_with(&self.ctx)
            {
                return Err(Error::mismatch(
                    CALL,
                    "a flag cell belongs to another context than the graph",
                ));
            }
        }
        self.add_with(
            CALL,
            0,
            dependencies,
            GraphNodeType::BATCH_MEM_OP,
            |g, body, deps| {
                let ops: Option<Vec<cuda::MemOp<'_>>> = ops.iter().map(MemOp::as_cuda).collect();
                g.add_mem_ops(body, deps, &ops.ok_or_else(|| mixed(CALL, "flag cell"))?)
            },
            |g, path, deps| {
                let ops: Option<Vec<cpu::MemOp>> = ops.iter().map(MemOp::as_cpu).collect();
                let ops = ops.ok_or_else(|| mixed(CALL, "flag cell"))?;
                Ok(g.add_op(path, cpu::work::mem_ops("memory operations", ops), deps)?)
            },
        )
    }

    /// Adds a node that records `event` when the graph runs it, after `dependencies`: work
    /// outside the graph can wait for that point. The graph keeps the event alive.
    pub fn add_event_record_node(
        &mut self,
        dependencies: &[GraphNode],
        event: &Arc<Event>,
    ) -> Result<GraphNode> {
        self.add_event_in("Graph::add_event_record_node", dependencies, event, false)
    }

    /// Adds a node that waits for `event`'s most recent record (work outside the graph)
    /// before the nodes that depend on it run. The graph keeps the event alive.
    pub fn add_event_wait_node(
        &mut self,
        dependencies: &[GraphNode],
        event: &Arc<Event>,
    ) -> Result<GraphNode> {
        self.add_event_in("Graph::add_event_wait_node", dependencies, event, true)
    }

    fn add_event_in(
        &mut self,
        call: &'static str,
        dependencies: &[GraphNode],
        event: &Arc<Event>,
        wait: bool,
    ) -> Result<GraphNode> {
        if !event.context().shares_memory_with(&self.ctx) {
            return Err(Error::mismatch(
                call,
                "the event belongs to another context than the graph",
            ));
        }
        let kind = if wait {
            GraphNodeType::WAIT_EVENT
        } else {
            GraphNodeType::EVENT_RECORD
        };
        let keep: Arc<dyn std::any::Any + Send + Sync> = event.clone();
        self.add_with(
            call,
            0,
            dependencies,
            kind,
            |g, body, deps| match event.kind() {
                EventBackend::Cuda(e) => {
                    g.add_event_node(body, deps, e, wait, cuda::Keep::Object(keep))
                }
                EventBackend::Cpu(_) => Err(mixed(call, "event")),
            },
            |g, path, deps| match event.kind() {
                EventBackend::Cpu(e) => Ok(g.add_event(path, deps, e, wait)?),
                EventBackend::Cuda(_) => Err(mixed(call, "event")),
            },
        )
    }

    /// Adds a node that runs a copy of `child` (taken now: later changes to `child` do not
    /// reach it). The graph keeps what `child` keeps. A graph with conditional nodes cannot
    /// be a child.
    pub fn add_child_graph_node(
        &mut self,
        dependencies: &[GraphNode],
        child: &Graph,
    ) -> Result<GraphNode> {
        const CALL: &str = "Graph::add_child_graph_node";
        if !child.ctx.shares_memory_with(&self.ctx) {
            return Err(Error::mismatch(
                CALL,
                "the child graph belongs to another context",
            ));
        }
        let child_backend = &child.backend;
        let (target, deps) = (self.scope_of(CALL, 0)?, self.deps(CALL, 0, dependencies)?);
        let id = match (&mut self.backend, child_backend, target, deps) {
            (GraphBackend::Cuda(g), GraphBackend::Cuda(c), Scope::Cuda(body), Deps::Cuda(d)) => {
                NodeId::Cuda(g.add_child_graph(body, &d, c)?)
            }
            (GraphBackend::Cpu(g), GraphBackend::Cpu(c), Scope::Cpu(path), Deps::Cpu(d)) => {
                NodeId::Cpu(g.add_child(&path, &d, c)?)
            }
            _ => return Err(mixed(CALL, "graph")),
        };
        Ok(self.made(0, GraphNodeType::GRAPH, id))
    }

    /// Captures what `work` enqueues on `stream` into this graph, after `dependencies`
    /// (CUDA: `cuStreamBeginCaptureToGraph`, 12.3+): the way to put a library call (cuBLAS,
    /// NCCL, code written against streams) into a graph built node by node. Other streams
    /// may join the capture through events and must rejoin `stream` before `work` returns.
    /// Returns the nodes the captured work ends with (`dependencies` when it enqueued
    /// nothing), for later nodes to depend on. The capture always ends, also when `work`
    /// fails or panics; what it captured then stays in the graph, so build a new one.
    pub fn capture_into(
        &mut self,
        dependencies: &[GraphNode],
        stream: &Stream,
        work: impl FnOnce(&Stream) -> Result<()>,
    ) -> Result<Vec<GraphNode>> {
        const CALL: &str = "Graph::capture_into";
        if !stream.context().shares_memory_with(&self.ctx) {
            return Err(Error::mismatch(
                CALL,
                "the stream belongs to another context than the graph",
            ));
        }
        let (target, deps) = (self.scope_of(CALL, 0)?, self.deps(CALL, 0, dependencies)?);
        let sinks = match (&mut self.backend, stream.kind(), target, deps) {
            (GraphBackend::Cuda(g), StreamBackend::Cuda(s), Scope::Cuda(body), Deps::Cuda(d)) => {
                let mode = CaptureMode::ThreadLocal.raw();
                g.begin_capture_into(body, &d, s, mode)?;
                let outcome = catch_unwind(AssertUnwindSafe(|| work(stream)));
                let ended = g.end_capture_into(s);
                match outcome {
                    Err(panic) => resume_unwind(panic),
                    Ok(Err(e)) => return Err(e),
                    Ok(Ok(())) => ended?.into_iter().map(NodeId::Cuda).collect::<Vec<_>>(),
                }
            }
            (GraphBackend::Cpu(g), StreamBackend::Cpu(s), Scope::Cpu(path), Deps::Cpu(d)) => {
                s.begin_capture()?;
                let outcome = catch_unwind(AssertUnwindSafe(|| work(stream)));
                let ended = s.end_capture();
                let captured = match outcome {
                    Err(panic) => resume_unwind(panic),
                    Ok(Err(e)) => return Err(e),
                    Ok(Ok(())) => ended?,
                };
                g.splice(&path, &d, captured)?
                    .into_iter()
                    .map(NodeId::Cpu)
                    .collect()
            }
            _ => return Err(mixed(CALL, "stream")),
        };
        let kinds: Vec<GraphNodeType> = match &self.backend {
            GraphBackend::Cuda(_) => sinks.iter().map(|_| GraphNodeType::EMPTY).collect(),
            GraphBackend::Cpu(g) => sinks
                .iter()
                .map(|id| match id {
                    NodeId::Cpu(i) => g
                        .nodes()
                        .get(*i)
                        .map_or(GraphNodeType::EMPTY, |n| super::cpu_node_type(n.kind())),
                    NodeId::Cuda(_) => GraphNodeType::EMPTY,
                })
                .collect(),
        };
        let dependencies_kinds: Vec<(NodeId, GraphNodeType)> =
            dependencies.iter().map(|n| (n.id, n.kind)).collect();
        Ok(sinks
            .into_iter()
            .zip(kinds)
            .map(|(id, kind)| {
                // A dependency handed back keeps its own kind.
                let kind = dependencies_kinds
                    .iter()
                    .find(|(d, _)| *d == id)
                    .map_or(kind, |(_, k)| *k);
                self.made(0, kind, id)
            })
            .collect())
    }

    /// A copy of the graph: the same nodes and edges, keeping the same memory alive; node
    /// handles of this graph do not name its nodes. A graph with conditional nodes cannot be
    /// cloned (a CUDA rule, kept on both backends).
    pub fn try_clone(&self) -> Result<Graph> {
        const CALL: &str = "Graph::try_clone";
        if self.has_conditional_nodes() {
            return Err(Error::invalid(
                CALL,
                "a graph with conditional nodes (device `while`/`if`) cannot be cloned (a CUDA \
                 rule); build it again",
            ));
        }
        self.scope_of(CALL, 0)?;
        let backend = match &self.backend {
            GraphBackend::Cuda(g) => GraphBackend::Cuda(g.try_clone()?),
            GraphBackend::Cpu(g) => GraphBackend::Cpu(g.clone()),
        };
        Ok(Graph::from_backend(&self.ctx, backend))
    }

    /// [`Graph::try_clone`], with the kernel nodes of the copy that `nodes` (kernel nodes of
    /// this graph, of its top level) became, in the same order: what code that updates a
    /// clone's nodes in place ([`GraphExec::set_kernel_params`](super::GraphExec::set_kernel_params))
    /// needs (`cuGraphNodeFindInClone`).
    ///
    /// ```
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, DeviceBuffer, Graph, PinnedBuffer, Stream};
    /// let ctx = Context::cpu();
    /// let stream = Stream::new(&ctx)?;
    /// let input = PinnedBuffer::from_slice(&ctx, &[7u32; 4])?;
    /// let mut field = DeviceBuffer::<u32>::alloc(&ctx, 4)?;
    /// let mut graph = Graph::new(&ctx)?;
    /// graph.add_copy_htod_node(&[], &input, &mut field)?;
    /// let (clone, nodes) = graph.try_clone_with_nodes(&[])?;
    /// assert!(nodes.is_empty());
    /// assert_eq!(clone.node_count()?, 1);
    /// clone.instantiate()?.launch(&stream)?;
    /// assert_eq!(field.to_vec(&stream)?, vec![7; 4]);
    /// # Ok(()) }
    /// ```
    pub fn try_clone_with_nodes(&self, nodes: &[KernelNode]) -> Result<(Graph, Vec<KernelNode>)> {
        const CALL: &str = "Graph::try_clone_with_nodes";
        if let Some(node) = nodes
            .iter()
            .find(|n| n.node.graph != self.id || n.node.scope != 0)
        {
            return Err(Error::invalid(
                CALL,
                if node.node.graph != self.id {
                    "a node belongs to another graph"
                } else {
                    "a node is inside a conditional body, which a graph with conditional nodes \
                     cannot be cloned with"
                },
            ));
        }
        match &self.backend {
            GraphBackend::Cuda(g) => {
                let raw: Vec<cuda::NodeRef> = nodes
                    .iter()
                    .map(|n| match n.node.id {
                        NodeId::Cuda(node) => Ok(node),
                        NodeId::Cpu(_) => Err(mixed(CALL, "node")),
                    })
                    .collect::<Result<_>>()?;
                if self.has_conditional_nodes() {
                    // `try_clone` says why.
                    self.try_clone()?;
                }
                let (clone, mapped) = g.try_clone_with(&raw)?;
                let clone = Graph::from_backend(&self.ctx, GraphBackend::Cuda(clone));
                let nodes = nodes
                    .iter()
                    .zip(mapped)
                    .map(|(n, node)| KernelNode {
                        node: GraphNode {
                            graph: clone.id,
                            scope: 0,
                            kind: n.node.kind,
                            id: NodeId::Cuda(node),
                        },
                        ..*n
                    })
                    .collect();
                Ok((clone, nodes))
            }
            GraphBackend::Cpu(_) => {
                let clone = self.try_clone()?;
                // A CPU-backend clone numbers its nodes as the original does.
                let nodes = nodes
                    .iter()
                    .map(|n| KernelNode {
                        node: GraphNode {
                            graph: clone.id,
                            ..n.node
                        },
                        ..*n
                    })
                    .collect();
                Ok((clone, nodes))
            }
        }
    }

    /// Whether the graph has a conditional (`while`/`if`) node.
    pub fn has_conditional_nodes(&self) -> bool {
        match &self.backend {
            GraphBackend::Cuda(g) => g.has_conditional_nodes(),
            GraphBackend::Cpu(g) => g.has_conditional_nodes(),
        }
    }
}

impl GraphBody<'_> {
    shared_node_methods!(body_graph, |b: &GraphBody<'_>| b.scope);

    /// The context of the graph the body belongs to.
    pub fn context(&self) -> &Context {
        &self.graph.ctx
    }
}

#[cfg(test)]
mod tests {
    use super::{INLINE_DEPS, InlineDeps};

    /// Every count, on the stack and past it, gives back exactly its items in order.
    #[test]
    fn inline_deps_hold_exactly_their_items() {
        for count in 0..=INLINE_DEPS + 3 {
            let items: Vec<usize> = (10..10 + count).collect();
            let deps = InlineDeps::new(items.iter().copied(), count);
            assert_eq!(&*deps, &items[..], "{count} dependencies");
            assert_eq!(
                matches!(deps, InlineDeps::Inline(..)),
                (1..=INLINE_DEPS).contains(&count),
                "{count} dependencies stay on the stack exactly when 1..={INLINE_DEPS}"
            );
        }
    }

    /// Fewer items than the count announced (dependencies of the other backend, filtered
    /// out) give back only those there are.
    #[test]
    fn inline_deps_take_only_the_items_given() {
        let deps = InlineDeps::new([7usize, 8].into_iter(), 3);
        assert_eq!(&*deps, &[7, 8]);
        let deps = InlineDeps::new([1usize, 2, 3].into_iter(), INLINE_DEPS + 1);
        assert_eq!(&*deps, &[1, 2, 3]);
    }
}
