//! Batches of in-place kernel-node updates: the hot path of scalar setters.
//!
//! A batch binds the context once and checks each module and buffer once, the first time one
//! of its nodes names it: later nodes that name the same ones cost a pointer comparison, the
//! argument packing (on the stack) and the driver's own `cuGraphExecKernelNodeSetParams`. A
//! batch allocates nothing unless a node names a module or buffer the executable graph does
//! not keep yet.

use crate::driver::{Driver, check};
use crate::error::{Error, Result};
use crate::launch::config::LaunchConfig;

use super::super::Function;
use super::super::keep::Checked;
use super::super::launch::{CudaArgs, with_node_params};
use super::kept::check_node;
use super::{GraphExec, NodeRef};

/// A batch of kernel-node updates on one executable graph, holding it exclusively.
///
/// Invariant: the context of `exec` was made current when the batch began, and every
/// pointer key in `checked` (between calls) names a module or allocation that `exec` keeps
/// alive and that belongs to its context.
pub(crate) struct KernelUpdates<'a> {
    pub(super) exec: &'a mut GraphExec,
    pub(super) driver: &'static Driver,
    pub(super) checked: Checked,
}

impl KernelUpdates<'_> {
    /// Changes the arguments and geometry of a kernel node of the source graph, for the next
    /// launches. The caller checked that `node` launches `function`, validated `config` and
    /// vouched for the arguments, as for a launch. Inlined into its caller, the setter's
    /// per-node step, so the arguments are not passed through one more call.
    #[inline]
    pub(crate) fn set(
        &mut self,
        node: &NodeRef,
        function: &Function,
        config: &LaunchConfig,
        args: &impl CudaArgs,
    ) -> Result<()> {
        const CALL: &str = "GraphExec::set_kernel_params";
        if node.graph != self.exec.source.id {
            return Err(Error::invalid(
                CALL,
                "the node belongs to another graph than the one this was instantiated from",
            ));
        }
        // Checked once per batch (the type's invariant holds: what passed is kept, below).
        // New buffers must outlive every later launch: retained before the driver sees them.
        let ctx = self.exec.source.ctx.raw();
        let checked = &mut self.checked;
        if let Some(new) = check_node(CALL, checked, &self.exec.keep_keys, ctx, function, args)? {
            self.exec.retain(new);
        }
        let (d, raw) = (self.driver, self.exec.raw);
        with_node_params(function, config, args, |params| {
            // SAFETY: a live executable graph whose context the batch made current (the
            // type's invariant), a kernel node of its source graph (checked by id) that runs
            // this function (the caller's check), and parameters valid for the call (the
            // driver copies them before returning).
            check("cuGraphExecKernelNodeSetParams", unsafe {
                (d.cuGraphExecKernelNodeSetParams)(raw, node.raw, params)
            })
        })
    }
}
