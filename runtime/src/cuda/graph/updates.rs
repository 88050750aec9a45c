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
use super::super::keep::{self, Keep};
use super::super::launch::{CudaArgs, with_node_params};
use super::{GraphExec, NodeRef};

/// How many modules and buffers a batch remembers as checked; past that it asks the
/// executable graph's set, which costs a hash per lookup but stays correct. Kept small: the
/// batch lives on the stack.
const REMEMBERED: usize = 16;

/// The modules and buffers a batch has checked, by address: a fixed array, so beginning a
/// batch allocates nothing.
pub(crate) struct Checked {
    keys: [usize; REMEMBERED],
    len: usize,
}

impl Checked {
    /// None yet.
    pub(crate) const fn new() -> Checked {
        Checked {
            keys: [0; REMEMBERED],
            len: 0,
        }
    }

    /// Whether `key` was remembered.
    #[inline]
    fn contains(&self, key: usize) -> bool {
        self.keys[..self.len].contains(&key)
    }

    /// Remembers `key` while there is room; past that, lookups fall back to the executable
    /// graph's set (see [`REMEMBERED`]).
    #[inline]
    fn remember(&mut self, key: usize) {
        if let Some(slot) = self.keys.get_mut(self.len) {
            *slot = key;
            self.len += 1;
        }
    }
}

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
    /// vouched for the arguments, as for a launch.
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
        let mark = self.checked.len;
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
        let visited = args.visit_memory(&mut |memory| {
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
            self.checked.len = mark;
            return Err(e);
        }
        if foreign {
            self.checked.len = mark;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_remembers_what_fits_and_forgets_back_to_a_mark() {
        let mut checked = Checked::new();
        assert!(!checked.contains(8));
        for key in 1..=REMEMBERED + 3 {
            checked.remember(key * 8);
        }
        // The first `REMEMBERED` are remembered; the rest are asked of the graph's set.
        assert!((1..=REMEMBERED).all(|key| checked.contains(key * 8)));
        assert!(!checked.contains((REMEMBERED + 1) * 8));
        // A failed call goes back to the length it started from.
        checked.len = 2;
        assert!(checked.contains(16) && !checked.contains(24));
    }
}
