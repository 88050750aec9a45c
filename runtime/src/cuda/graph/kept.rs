//! The check a kernel node's add and its in-place update share: the module and each buffer
//! the node names must be of the graph's context, and kept by the graph for as long as the
//! node can run. Each is checked once per graph (or update batch): `Checked` remembers it,
//! so the nodes after the first that name the same ones cost a comparison each.

use crate::error::{Error, Result};
use crate::sys;

use super::super::Function;
use super::super::keep::{self, Checked, Keep, KeySet};
use super::super::launch::CudaArgs;

/// Checks `function`'s module and each buffer of `args` against a graph of `ctx` that keeps
/// `kept`, and returns what the node needs kept that the graph does not keep yet (`None`,
/// the usual case: only something new is cloned, so a buffer passed to 100 nodes allocates
/// nothing). The caller keeps it before the node can run.
///
/// What passed is remembered in `checked`: the caller keeps it alive (with what this
/// returns) for as long as it uses `checked`, since an address is a sound key only while
/// what it names lives. On an error, nothing this call remembered stays.
#[inline(always)]
pub(super) fn check_node(
    call: &'static str,
    checked: &mut Checked,
    kept: &KeySet,
    ctx: sys::CUcontext,
    function: &Function,
    args: &impl CudaArgs,
) -> Result<Option<Vec<Keep>>> {
    let mark = checked.mark();
    let mut new: Option<Vec<Keep>> = None;
    let module = function.module();
    let module_key = keep::key_of(module);
    if !checked.contains(module_key) {
        if module.context().raw() != ctx {
            return Err(Error::mismatch(
                call,
                "the kernel is loaded in another context than the graph's",
            ));
        }
        if !kept.contains(&module_key) {
            new.get_or_insert_default()
                .push(Keep::Object(module.clone()));
        }
        checked.remember(module_key);
    }
    let mut foreign = false;
    let visited = args.visit_memory(|memory| {
        let key = keep::key_of(memory);
        if checked.contains(key) {
            return;
        }
        if memory.context().raw() != ctx {
            foreign = true;
            return;
        }
        if !kept.contains(&key) {
            new.get_or_insert_default()
                .push(Keep::Device(memory.clone()));
        }
        checked.remember(key);
    });
    let refused = match visited {
        Err(e) => e,
        Ok(()) if foreign => Error::mismatch(
            call,
            "a buffer argument belongs to another context than the graph",
        ),
        Ok(()) => return Ok(new),
    };
    checked.forget_back_to(mark);
    Err(refused)
}
