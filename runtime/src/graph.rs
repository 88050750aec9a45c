//! CUDA graphs: the recorded work of a capture, instantiated once and launched many times.

use crate::context::Context;
use crate::error::{Result, check};
use crate::host::HostGraph;
use crate::memory::alloc::KeepAlive;
use crate::sys;

/// A graph recorded by [`Stream::end_capture`](crate::Stream::end_capture) or
/// [`Stream::capture`](crate::Stream::capture).
pub struct Graph {
    ctx: Context,
    raw: sys::CUgraph,
    /// Host closures and other objects the graph's nodes point at.
    keepalive: Vec<KeepAlive>,
    /// The recorded operations on the host backend (`raw` is then null).
    host: Option<HostGraph>,
}

// SAFETY: a CUgraph may be used from any thread; we never mutate it concurrently (`&mut`
// for edits, `&self` for reads, which the driver allows from several threads).
unsafe impl Send for Graph {}
// SAFETY: as above.
unsafe impl Sync for Graph {}

impl Graph {
    /// Takes ownership of a graph handle.
    ///
    /// # Safety
    /// `raw` must be a live graph of `ctx`'s context that nothing else destroys.
    pub(crate) unsafe fn from_raw(
        ctx: &Context,
        raw: sys::CUgraph,
        keepalive: Vec<KeepAlive>,
    ) -> Graph {
        Graph {
            ctx: ctx.clone(),
            raw,
            keepalive,
            host: None,
        }
    }

    /// Wraps a graph the host backend recorded.
    pub(crate) fn from_host(ctx: &Context, graph: HostGraph) -> Graph {
        Graph {
            ctx: ctx.clone(),
            raw: std::ptr::null_mut(),
            keepalive: Vec::new(),
            host: Some(graph),
        }
    }

    /// The number of nodes.
    pub fn node_count(&self) -> Result<usize> {
        if let Some(h) = &self.host {
            return Ok(h.node_count());
        }

        let c = self.ctx.bound_cuda("Graph::node_count")?;
        let mut count = 0;
        // SAFETY: a live graph; a null node array asks for the count only.
        check("cuGraphGetNodes", unsafe {
            (c.driver.cuGraphGetNodes)(self.raw, std::ptr::null_mut(), &mut count)
        })?;
        Ok(count)
    }

    /// The raw handle, owned by this `Graph`.
    pub fn handle(&self) -> sys::CUgraph {
        self.raw
    }

    /// The context the graph belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    pub(crate) fn keepalive(&self) -> &[KeepAlive] {
        &self.keepalive
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if self.host.is_some() {
            return;
        }
        let Ok(c) = self.ctx.bound_cuda("Graph::drop") else {
            return;
        };
        // SAFETY: we own the graph; executable graphs instantiated from it are independent.
        let code = unsafe { (c.driver.cuGraphDestroy)(self.raw) };
        if !code.is_success() {
            tracing::warn!(?code, "cuGraphDestroy failed while dropping a graph");
        }
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("raw", &self.raw).finish()
    }
}
