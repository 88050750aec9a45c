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
use super::super::keep::{self, Checked, Keep};
use super::super::launch::{CudaArgs, with_node_params};
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
        let ctx = self.exec.source.ctx.raw();
        // What this call checks for the first time is remembered at once, and forgotten
        // again (back to `mark`) if the call fails, so an error part-way leaves the batch's
        // invariant intact; `new` allocates only for a module or buffer not yet kept.
        let mark = self.checked.mark();
        // `None` until something is new: nearly every call has nothing to keep, and dropping
        // an empty vector still costs a call per node.
        let mut new: Option<Vec<Keep>> = None;
        let module = function.module();
        let module_key = keep::key_of(module);
        if !self.checked.contains(module_key) {
            if module.context().raw() != ctx {
                return Err(Error::mismatch(
                    CALL,
                    "the kernel is loaded in another context than the graph's",
                ));
            }
            if !self.exec.keep_keys.contains(&module_key) {
                new.get_or_insert_default()
                    .push(Keep::Object(module.clone()));
            }
            self.checked.remember(module_key);
        }
        let (checked, keep_keys) = (&mut self.checked, &self.exec.keep_keys);
        let mut foreign = false;
        let visited = args.visit_memory(|memory| {
            let key = keep::key_of(memory);
            if checked.contains(key) {
                return;
            }
            foreign |= memory.context().raw() != ctx;
            if !keep_keys.contains(&key) {
                new.get_or_insert_default()
                    .push(Keep::Device(memory.clone()));
            }
            checked.remember(key);
        });
        if let Err(e) = visited {
            self.checked.forget_back_to(mark);
            return Err(e);
        }
        if foreign {
            self.checked.forget_back_to(mark);
            return Err(Error::mismatch(
                CALL,
                "a buffer argument belongs to another context than the graph",
            ));
        }
        // New buffers must outlive every later launch: retained before the driver sees them.
        if let Some(new) = new {
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
