//! Executable graphs: launches, in-place updates and the lifetimes they keep.

use super::*;
use crate::cuda::held::Held;

///
/// Invariant: `raw` was instantiated from `source` and is destroyed once, in `Drop`, after
/// every launch of it completed (or leaked, with everything it keeps, when that cannot be
/// known); `keep` holds everything its nodes point at, including what in-place updates added.
pub(crate) struct GraphExec {
    pub(super) raw: sys::CUgraphExec,
    pub(super) source: Arc<GraphHandle>,
    keep: Vec<Keep>,
    pub(super) keep_keys: KeySet,
    /// The pinned allocations among `keep`, fenced after each launch; sorted by address, the
    /// order launches take their gates in.
    pinned: Vec<Arc<PinnedMemory>>,
    /// The managed allocations among `keep`, whose host slices block launches; sorted.
    managed: Vec<Arc<DeviceMemory>>,
    /// The panic logs of the graph's host nodes.
    panics: Vec<PanicLog>,
    launched: AtomicBool,
    /// Its context's lane when the graph has device loops: launches of such graphs run one
    /// after another (`lane.rs`).
    lane: Option<Arc<lane::LoopLane>>,
    /// Serializes launches and uploads: executable graphs are not internally synchronized.
    lock: Mutex<()>,
}

// SAFETY: a CUgraphExec may be used from any thread; `&self` calls are serialized by `lock`
// and edits take `&mut self`.
unsafe impl Send for GraphExec {}
// SAFETY: as above.
unsafe impl Sync for GraphExec {}

/// The verdict of a whole-graph update, with the nodes the driver named.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeUpdate {
    pub(crate) result: CUgraphExecUpdateResult,
    pub(crate) error_node: Option<(NodeRef, CUgraphNodeType)>,
    pub(crate) error_from_node: Option<(NodeRef, CUgraphNodeType)>,
}

impl GraphExec {
    /// Owns `raw`, instantiated from `source`, keeping what the source graph keeps.
    pub(super) fn new(
        raw: sys::CUgraphExec,
        source: Arc<GraphHandle>,
        keep: &[Keep],
        lane: Option<Arc<lane::LoopLane>>,
    ) -> GraphExec {
        let mut exec = GraphExec {
            raw,
            source,
            keep: Vec::new(),
            keep_keys: KeySet::default(),
            pinned: Vec::new(),
            managed: Vec::new(),
            panics: Vec::new(),
            launched: AtomicBool::new(false),
            lane,
            lock: Mutex::new(()),
        };
        exec.retain(keep.iter().cloned());
        exec
    }

    /// The raw handle (owned by this value).
    pub(crate) fn raw(&self) -> sys::CUgraphExec {
        self.raw
    }

    /// What it keeps alive.
    pub(crate) fn keep(&self) -> &[Keep] {
        &self.keep
    }

    /// Holds `items` for the rest of its life (before the driver may use them).
    pub(super) fn retain(&mut self, items: impl IntoIterator<Item = Keep>) {
        let before = self.keep.len();
        if !extend_keep(&mut self.keep, &mut self.keep_keys, items) {
            return;
        }
        for item in &self.keep[before..] {
            match item {
                Keep::Pinned(p) => self.pinned.push(p.clone()),
                Keep::Device(m) if m.kind() == AllocKind::Managed => self.managed.push(m.clone()),
                Keep::Panics(log) => self.panics.push(log.clone()),
                Keep::Device(_) | Keep::Object(_) => {}
            }
        }
        self.pinned.sort_by_key(|p| Arc::as_ptr(p) as usize);
        self.managed.sort_by_key(|m| Arc::as_ptr(m) as usize);
    }

    /// After a whole update to a graph that keeps `keep`: every node now points at what
    /// `keep` holds, so the launches from now on fence, gate and watch only that. `keep`
    /// itself still holds what earlier parameters pointed at, for the launches in flight (it
    /// is released when the executable graph is dropped, after them); their fences were
    /// recorded when they were enqueued. Without this, a step re-recorded every iteration
    /// with new pinned buffers or host closures would fence and watch more at every launch.
    fn touch_only(&mut self, keep: &[Keep]) {
        self.pinned.clear();
        self.managed.clear();
        self.panics.clear();
        for item in keep {
            match item {
                Keep::Pinned(p) => self.pinned.push(p.clone()),
                Keep::Device(m) if m.kind() == AllocKind::Managed => self.managed.push(m.clone()),
                Keep::Panics(log) => self.panics.push(log.clone()),
                Keep::Device(_) | Keep::Object(_) => {}
            }
        }
        self.pinned.sort_by_key(|p| Arc::as_ptr(p) as usize);
        self.pinned.dedup_by_key(|p| Arc::as_ptr(p) as usize);
        self.managed.sort_by_key(|m| Arc::as_ptr(m) as usize);
        self.managed.dedup_by_key(|m| Arc::as_ptr(m) as usize);
    }

    /// Enqueues one run of the whole graph on `stream` (a stream of its context).
    pub(crate) fn launch(&self, stream: &Stream) -> Result<()> {
        const CALL: &str = "GraphExec::launch";
        if stream.context().raw() != self.source.ctx.raw() {
            return Err(Error::mismatch(
                CALL,
                "the stream belongs to another context than the graph",
            ));
        }
        let _stream_gate = stream.gate();
        let capture = stream.capture_now()?;
        // While the gates are held no host slice can be taken; a slice taken after waits for
        // the fences recorded before they are released.
        let managed_gates = Held::take(&self.managed, |m| m.gate());
        if self.managed.iter().any(|m| m.is_borrowed()) {
            return Err(borrowed_error(CALL, "managed"));
        }
        let mut gates = Held::take(&self.pinned, |p| p.gate());
        if gates.iter().any(|g| g.is_borrowed()) {
            return Err(borrowed_error(CALL, "pinned"));
        }
        if capture.is_none() && !gates.is_empty() {
            // One fence for every allocation: the stream's next sequence number, marked after
            // the launch with no driver call on a stream this crate owns (`fence.rs`).
            stream.fence_clock().prepare()?;
        }
        if let Some(id) = capture {
            // Launched into another capture: that graph must keep this one's memory too.
            for item in &self.keep {
                keep::keep(id, item.clone());
            }
        }
        let d = stream.bind()?;
        let launch = || {
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.launched.store(true, Ordering::Release);
            // SAFETY: a live executable graph and a live stream of its context (checked);
            // everything its nodes touch is kept alive by `keep`, and no host slice of its
            // pinned or managed memory is alive (checked under the gates).
            check("cuGraphLaunch", unsafe {
                (d.cuGraphLaunch)(self.raw, stream.raw())
            })
        };
        match (&self.lane, capture) {
            (Some(lane), None) => lane.launch(stream, launch)?,
            _ => launch()?,
        }
        if capture.is_none() && !gates.is_empty() {
            let fence = stream.fence_clock().mark();
            for gate in gates.iter_mut() {
                gate.keep_fence(fence.as_ref());
            }
        }
        for log in &self.panics {
            stream.watch_panics(log);
        }
        drop(managed_gates);
        Ok(())
    }

    /// Notes that no launch of it is pending: its owner, which alone can reach it (it holds
    /// it by value, and drops it next), synchronized its context after the last launch. Its
    /// drop then need not wait. Any launch after this sets `launched` again.
    pub(crate) fn idle_after_synchronize(&self) {
        self.launched.store(false, Ordering::Release);
    }

    /// Uploads the graph's work ahead of its first launch, in `stream`'s order.
    pub(crate) fn upload(&self, stream: &Stream) -> Result<()> {
        if stream.context().raw() != self.source.ctx.raw() {
            return Err(Error::mismatch(
                "GraphExec::upload",
                "the stream belongs to another context than the graph",
            ));
        }
        let d = stream.bind()?;
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.launched.store(true, Ordering::Release);
        // SAFETY: a live executable graph and a live stream of its context.
        check("cuGraphUpload", unsafe {
            (d.cuGraphUpload)(self.raw, stream.raw())
        })
    }

    /// Starts a batch of kernel-node updates: binds the context once for the batch.
    pub(crate) fn kernel_updates(&mut self) -> Result<KernelUpdates<'_>> {
        let driver = self.source.ctx.bind()?;
        Ok(KernelUpdates {
            exec: self,
            driver,
            checked: super::super::keep::Checked::new(),
        })
    }

    /// Updates the executable graph to `graph`'s parameters (same topology); returns the
    /// driver's verdict.
    pub(crate) fn update(&mut self, graph: &Graph) -> Result<NodeUpdate> {
        if graph.handle.ctx.raw() != self.source.ctx.raw() {
            return Err(Error::mismatch(
                "GraphExec::update",
                "the graph belongs to another context",
            ));
        }
        // Ordered as its first instantiation was, so the topologies can match.
        graph.order_loops()?;
        // Retained before the call: whatever the driver takes from `graph` must outlive us.
        self.retain(graph.keep.iter().cloned());
        let d = self.source.ctx.bind()?;
        let mut info = sys::CUgraphExecUpdateResultInfo {
            result: CUgraphExecUpdateResult::SUCCESS,
            errorNode: std::ptr::null_mut(),
            errorFromNode: std::ptr::null_mut(),
        };
        let code = {
            let _exec = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            let _graph = graph.handle.lock();
            // SAFETY: a live executable graph and graph of one context, and a valid
            // out-pointer.
            unsafe { (d.cuGraphExecUpdate)(self.raw, graph.handle.raw, &mut info) }
        };
        // Updated or not, its nodes may now point at memory `graph` is zeroing: no launch
        // before that ran.
        graph.settle_zeroing()?;
        if code != CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE {
            check("cuGraphExecUpdate", code)?;
        }
        let node = |raw: sys::CUgraphNode| -> Option<(NodeRef, CUgraphNodeType)> {
            if raw.is_null() {
                return None;
            }
            let mut kind = CUgraphNodeType::EMPTY;
            let _graph = graph.handle.lock();
            // SAFETY: a node the driver reported for `graph`, which is alive.
            let code = unsafe { (d.cuGraphNodeGetType)(raw, &mut kind) };
            code.is_success().then_some((graph.node(raw), kind))
        };
        let result = if code.is_success() {
            CUgraphExecUpdateResult::SUCCESS
        } else if info.result == CUgraphExecUpdateResult::SUCCESS {
            CUgraphExecUpdateResult::ERROR
        } else {
            info.result
        };
        if result == CUgraphExecUpdateResult::SUCCESS {
            self.touch_only(&graph.keep);
        }
        Ok(NodeUpdate {
            result,
            error_node: node(info.errorNode),
            error_from_node: node(info.errorFromNode),
        })
    }

    /// The error of a refused update, as a driver error naming the verdict.
    pub(crate) fn update_error(outcome: &NodeUpdate) -> Error {
        let mut e = driver_error(
            "cuGraphExecUpdate",
            CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
        );
        e.description = format!(
            "{}: {:?}{}",
            e.description,
            outcome.result,
            match outcome.error_node {
                Some((_, kind)) => format!(" at a {kind:?} node"),
                None => String::new(),
            }
        );
        e.into()
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // A launch may still run: its nodes use the modules and closures we are about to
        // release, so wait for the context first (unless its owner marked it idle after a
        // synchronize: `idle_after_synchronize`); when that fails, leak everything.
        if self.launched.load(Ordering::Acquire)
            && let Err(e) = self.source.ctx.synchronize()
        {
            tracing::warn!(error = %e, "synchronizing before destroying a graph exec failed; leaking what it holds");
            std::mem::forget(std::mem::take(&mut self.keep));
            std::mem::forget(std::mem::take(&mut self.pinned));
            std::mem::forget(std::mem::take(&mut self.managed));
            std::mem::forget(self.source.clone());
            return;
        }
        let Ok(d) = self.source.ctx.bind() else {
            return;
        };
        // SAFETY: we own the executable graph and no launch of it is pending.
        let code = unsafe { (d.cuGraphExecDestroy)(self.raw) };
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
        f.debug_struct("cuda::GraphExec")
            .field("raw", &self.raw)
            .field("keep", &self.keep.len())
            .finish()
    }
}

/// The error of a graph launch that finds a host slice of its memory alive.
pub(crate) fn borrowed_error(call: &'static str, what: &str) -> Error {
    Error::invalid(
        call,
        format!(
            "a host slice of {what} memory this graph touches is alive (from `as_slice` or \
             `as_mut_slice`, or a pipeline window's accessor); drop the slice before launching \
             (one passed to `mem::forget` blocks the graph's launches for good)"
        ),
    )
}
