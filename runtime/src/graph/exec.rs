//! Executable graphs: launching, uploading and updating what [`Graph::instantiate`] made.

use super::*;

/// An executable graph: launch it on any stream of its context, as often as needed, and
/// change a kernel node's arguments in place between launches.
///
/// ```standalone_crate
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{CaptureMode, Context, CpuKernel, DeviceBuffer, LaunchConfig, Module, Stream};
///
/// fn saxpy_on_cpu(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
///     for i in 0..n as usize {
///         y[i] += a * x[i];
///     }
/// }
///
/// let ctx = Context::cpu();
/// let stream = Stream::non_blocking(&ctx)?;
/// let module = Module::load_ptx(&ctx, include_str!("../../kernels/saxpy.ptx"))?;
/// // SAFETY: `saxpy(unsigned n, float a, const float* x, float* y)` touches `x[i]`, `y[i]`
/// // for `i < n` only, and `n` is the buffers' length below.
/// let saxpy = unsafe { module.function("saxpy")?.typed::<(u32, f32, &[f32], &mut [f32])>()? }
///     .with_cpu(CpuKernel::new(saxpy_on_cpu));
/// let x = DeviceBuffer::from_slice(&stream, &[1.0f32; 64])?;
/// let mut y = DeviceBuffer::from_slice(&stream, &[0.0f32; 64])?;
/// let config = LaunchConfig::new(1, 64);
///
/// let graph = stream.capture(CaptureMode::ThreadLocal, |s| {
///     saxpy.launch(s, config, (64u32, 2.0f32, &x, &mut y))
/// })?;
/// let mut exec = graph.instantiate()?;
/// exec.launch(&stream)?; // y = 2
/// let node = graph.kernel_nodes_in_launch_order()?[0];
/// exec.set_kernel_params(&node, &saxpy, config, (64u32, 0.5f32, &x, &mut y))?;
/// exec.launch(&stream)?; // y = 2.5
/// drop((exec, graph)); // waits for the launches, which use `y`
/// assert_eq!(y.to_vec(&stream)?, vec![2.5f32; 64]);
/// # Ok(()) }
/// ```
pub struct GraphExec {
    pub(super) ctx: Context,
    /// The id of the graph it was instantiated from.
    pub(super) source: u64,
    pub(super) backend: ExecBackend,
    /// The graph's `while` loops, checked by [`GraphExec::check_loops`].
    pub(super) loops: Vec<LoopState>,
    /// Held while it lives when its graph has conditional nodes (one executable graph each).
    pub(super) _instance: Option<Arc<()>>,
}

/// The one backend value a [`GraphExec`] holds.
pub(super) enum ExecBackend {
    Cuda(cuda::GraphExec),
    Cpu(CpuExec),
}

/// A CPU-backend executable graph, with the host-visible memory its launches gate on.
pub(super) struct CpuExec {
    pub(super) exec: cpu::GraphExec,
    pub(super) host_visible: Vec<Arc<cpu::Memory>>,
    /// Whether a launch was enqueued: only then does the drop wait, as CUDA's does.
    launched: std::sync::atomic::AtomicBool,
}

impl CpuExec {
    pub(super) fn new(exec: cpu::GraphExec) -> CpuExec {
        let mut cpu = CpuExec {
            exec,
            host_visible: Vec::new(),
            launched: std::sync::atomic::AtomicBool::new(false),
        };
        cpu.refresh();
        cpu
    }

    /// Recomputes the host-visible memory after the nodes changed, sorted (gate order).
    pub(super) fn refresh(&mut self) {
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
///
/// ```
/// use gpu_pipeline::{CaptureMode, Context, DeviceBuffer, GraphUpdateResult, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let mut x = DeviceBuffer::<u32>::alloc(&ctx, 8)?;
/// let mut fill = |value| {
///     stream.capture(CaptureMode::ThreadLocal, |s| s.memset_u32(&mut x, value))
/// };
/// let mut exec = fill(1)?.instantiate()?;
/// // Same topology, another value: the executable graph takes the new parameters in place.
/// let update = exec.try_update(&fill(2)?)?;
/// assert!(update.is_success());
/// // Another topology: refused, naming why; `exec` still runs what it ran before.
/// let two = stream.capture(CaptureMode::ThreadLocal, |s| {
///     s.memset_u32(&mut x, 3)?;
///     s.memset_u32(&mut x, 4)
/// })?;
/// let refused = exec.try_update(&two)?;
/// assert!(!refused.is_success());
/// assert_ne!(refused.result, GraphUpdateResult::SUCCESS);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
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
    /// See `cuda::GraphExec::idle_after_synchronize`: for a build that `drop_captured` holds
    /// by value after synchronizing `ctx`, its context.
    pub(crate) fn idle_after_synchronize(&self, ctx: &cuda::Context) {
        if let ExecBackend::Cuda(e) = &self.backend
            && self.cuda_context().is_some_and(|c| c.raw() == ctx.raw())
        {
            e.idle_after_synchronize();
        }
    }

    /// The CUDA context it runs in (`None` on the CPU backend).
    pub(crate) fn cuda_context(&self) -> Option<&std::sync::Arc<cuda::Context>> {
        match self.ctx.kind() {
            crate::context::ContextBackend::Cuda(c) => Some(c),
            crate::context::ContextBackend::Cpu(_) => None,
        }
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
    /// ([`HostView`](crate::HostView), from `as_slice` / `as_mut_slice`) of pinned or
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
            (ExecBackend::Cuda(e), StreamBackend::Cuda(s)) => {
                e.launch(s)?;
                // Captured NCCL groups: each launch is watched against their deadline.
                crate::nccl::watch_launch(e.keep(), stream)
            }
            (ExecBackend::Cpu(e), StreamBackend::Cpu(s)) => {
                // While the gates are held no host slice can be taken; one taken later waits
                // for this launch's pending work.
                let gates: Vec<_> = e.host_visible.iter().map(|m| m.gate()).collect();
                if e.host_visible.iter().any(|m| m.is_borrowed()) {
                    return Err(Error::invalid(
                        CALL,
                        "a host slice of pinned or managed memory this graph touches is alive \
                         (from `as_slice` or `as_mut_slice`, or a pipeline window's accessor); \
                         drop the slice before launching (one passed to `mem::forget` blocks \
                         the graph's launches for good)",
                    ));
                }
                e.launched.store(true, std::sync::atomic::Ordering::Relaxed);
                s.launch(&e.exec)?;
                drop(gates);
                Ok(())
            }
            _ => Err(mixed(CALL, "graph")),
        }
    }

    /// The state of every `while` loop of the graph, as its launches leave it.
    pub fn loops(&self) -> &[LoopState] {
        &self.loops
    }

    /// After the launches have completed (a synchronize): [`Error::IterationLimit`] for the
    /// first `while` loop that stopped at its maximum iteration count with its condition still
    /// holding since the last check (each loop's mark is cleared), `Ok` otherwise. A loop
    /// never runs forever; this is how a loop that did not converge is reported.
    pub fn check_loops(&self) -> Result<()> {
        let mut first = None;
        for state in &self.loops {
            if let Err(e) = state.check() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
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
    ///
    /// The kernel's bounds are checked first ([`TypedKernel::check_bounds`]): arguments
    /// that break one are refused with [`Error::KernelBound`] and the node keeps its
    /// previous parameters.
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
    /// A graph one of whose conditional bodies failed to build is refused
    /// ([`Error::InvalidArgument`]), as [`Graph::instantiate`] refuses it, and so is a graph
    /// with conditional nodes that has another executable graph alive: after the update this
    /// one is that graph's executable graph (its loops' states are shared with the graph), and
    /// `graph.instantiate()` is refused while this one lives.
    pub fn update(&mut self, graph: &Graph) -> Result<()> {
        let slot = self.instance_slot("GraphExec::update", graph)?;
        let updated = self.update_unclaimed(graph);
        if updated.is_ok() {
            self.claim(slot);
        }
        updated
    }

    /// [`GraphExec::update`] once the graph may be updated from.
    fn update_unclaimed(&mut self, graph: &Graph) -> Result<()> {
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
                    // The condition kernels now write the new graph's loop states.
                    self.loops = graph.loops.clone();
                    Ok(())
                } else {
                    Err(cuda::GraphExec::update_error(&outcome))
                }
            }
            _ => Err(mixed("GraphExec::update", "graph")),
        }
    }

    /// [`GraphExec::update`], returning the driver's verdict and the node it names instead
    /// of an error when the update is refused. A graph one of whose conditional bodies failed
    /// to build, or one with conditional nodes and another executable graph alive, is an
    /// error, not a verdict (see [`GraphExec::update`]).
    pub fn try_update(&mut self, graph: &Graph) -> Result<GraphUpdate> {
        let slot = self.instance_slot("GraphExec::update", graph)?;
        let outcome = self.try_update_unclaimed(graph)?;
        if outcome.is_success() {
            self.claim(slot);
        }
        Ok(outcome)
    }

    /// Before a whole update from `graph`: refuses a graph whose conditional body failed to
    /// build (nothing may run an unfinished conditional node), and a graph with conditional
    /// nodes whose one executable graph is another one (two would share its loops' states,
    /// which `Graph::instantiate` prevents). Returns that graph's slot, locked, for
    /// [`claim`](Self::claim) after a successful update.
    fn instance_slot<'g>(
        &self,
        call: &'static str,
        graph: &'g Graph,
    ) -> Result<Option<std::sync::MutexGuard<'g, std::sync::Weak<()>>>> {
        graph.refuse_broken(call)?;
        if !graph.has_conditional_nodes() {
            return Ok(None);
        }
        let slot = graph
            .instance
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(alive) = slot.upgrade()
            && !self
                ._instance
                .as_ref()
                .is_some_and(|mine| Arc::ptr_eq(mine, &alive))
        {
            return Err(Error::invalid(
                call,
                "the new graph has conditional nodes (device `while`/`if`) and another \
                 executable graph of it is alive; a graph with conditional nodes has one \
                 executable graph at a time (they share its loops' states): drop that one \
                 first, or update from a graph of its own",
            ));
        }
        Ok(Some(slot))
    }

    /// After a successful update from the graph whose slot this is: this executable graph
    /// is its one executable graph from now on (while it lives).
    fn claim(&self, slot: Option<std::sync::MutexGuard<'_, std::sync::Weak<()>>>) {
        if let (Some(mut slot), Some(token)) = (slot, &self._instance) {
            *slot = Arc::downgrade(token);
        }
    }

    /// [`GraphExec::try_update`] once the graph may be updated from.
    fn try_update_unclaimed(&mut self, graph: &Graph) -> Result<GraphUpdate> {
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
                if outcome.result == GraphUpdateResult::SUCCESS {
                    self.loops = graph.loops.clone();
                }
                let node = |n: Option<(cuda::NodeRef, GraphNodeType)>| {
                    n.map(|(node, kind)| GraphNode {
                        graph: graph.id,
                        scope: 0,
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
        // Each node keeps its kind (CUDA: `ERROR_NODE_TYPE_CHANGED`), and kernel nodes must
        // launch the same kernels (CUDA: the same functions).
        for (index, (old, new)) in e.exec.nodes().zip(new.nodes()).enumerate() {
            if old.kind() != new.kind() {
                return Ok(Err((
                    GraphUpdateResult::ERROR_NODE_TYPE_CHANGED,
                    format!("node {index} (`{}`) is of another kind", new.label()),
                )));
            }
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
        self.loops = graph.loops.clone();
        Ok(Ok(()))
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // Keeps CUDA's blocking behaviour on the CPU backend too (the nodes hold their
        // memory, so nothing is freed early either way): a graph never launched waits for
        // nothing, so a stream blocked on work the host enqueues later cannot hang the drop.
        if let ExecBackend::Cpu(e) = &self.backend
            && e.launched.load(std::sync::atomic::Ordering::Relaxed)
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
