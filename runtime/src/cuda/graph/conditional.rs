//! Conditional nodes (device-side `while` and `if`, CUDA 12.4+ drivers): a conditional handle,
//! the node with its body graph, and the library's condition kernels
//! (`runtime/kernels/conditions.cu`) that set the handle.
//!
//! Layout of a `while` in its graph: `K0 -> WHILE(body)`, with the body ending in `K`. `K0`
//! evaluates the condition before the first iteration (0 iterations done), `K` after each
//! iteration; both count iterations in the loop's state word and stop the loop once it has
//! run `max_iterations` times while the condition still holds, marking the word so that the
//! host reports it. An `if` is `K0 -> IF(body)`. Conditional handles are created without a
//! default value: `K0` sets the handle in every launch before the node reads it.

use std::ffi::c_void;
use std::sync::{Mutex, Weak};

use super::*;
use crate::driver::version_text;

/// The condition kernels, as `tools/build-ptx` compiles them (PTX ISA 8.0).
const CONDITIONS_PTX: &str = include_str!("../../../kernels/conditions.ptx");

/// The first driver whose conditional nodes we use: the one that made IF/WHILE official.
const CONDITIONAL_DRIVER: i32 = 12040;

/// Which condition kernel decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConditionKind {
    /// `value OP threshold` on an `f32`.
    F32,
    /// On an `f64`.
    F64,
    /// On a `u32`.
    U32,
    /// `counter % modulus == remainder` on a flag word.
    Every,
}

impl ConditionKind {
    fn entry(self) -> &'static str {
        match self {
            ConditionKind::F32 => "gp_cond_f32",
            ConditionKind::F64 => "gp_cond_f64",
            ConditionKind::U32 => "gp_cond_u32",
            ConditionKind::Every => "gp_cond_every",
        }
    }
}

/// What a condition kernel is launched with, besides the handle and `first`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConditionArgs {
    /// Which kernel.
    pub(crate) kind: ConditionKind,
    /// The device address of the value (or of the counter word).
    pub(crate) value: sys::CUdeviceptr,
    /// The threshold's bits (`f32::to_bits`, `f64::to_bits`, the `u32`), or the modulus.
    pub(crate) threshold: u64,
    /// The comparison's number, or the remainder.
    pub(crate) op: u32,
    /// The device address of the loop's state word.
    pub(crate) state: sys::CUdeviceptr,
    /// The device memory the condition kernel counts iterations in, set by
    /// [`Graph::add_conditional`] (0 before): counting in the state word itself would read
    /// host memory across the bus at every iteration.
    pub(crate) counter: sys::CUdeviceptr,
    /// The most iterations allowed (`u32::MAX` for an `if`).
    pub(crate) max_iterations: u32,
}

/// The packed arguments of one condition kernel launch, laid out as its PTX parameters.
struct KernelArgs {
    handle: u64,
    value: u64,
    threshold_f32: f32,
    threshold_f64: f64,
    threshold_u32: u32,
    kind: ConditionKind,
    op: u32,
    state: u64,
    counter: u64,
    max_iterations: u32,
    first: u32,
}

impl KernelArgs {
    fn new(handle: u64, args: &ConditionArgs, first: bool) -> KernelArgs {
        KernelArgs {
            handle,
            value: args.value,
            threshold_f32: f32::from_bits(args.threshold as u32),
            threshold_f64: f64::from_bits(args.threshold),
            threshold_u32: args.threshold as u32,
            kind: args.kind,
            op: args.op,
            state: args.state,
            counter: args.counter,
            max_iterations: args.max_iterations,
            first: u32::from(first),
        }
    }
}

fn param<T>(value: &T) -> *mut c_void {
    (value as *const T).cast_mut().cast()
}

impl CudaArgs for KernelArgs {
    fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        // (handle: u64, value: u64, threshold: f32 | f64 | u32, op: u32, state: u64,
        // iterations: u64, max_iterations: u32, first: u32), as every `gp_cond_*` entry
        // declares them.
        let threshold = match self.kind {
            ConditionKind::F32 => param(&self.threshold_f32),
            ConditionKind::F64 => param(&self.threshold_f64),
            ConditionKind::U32 | ConditionKind::Every => param(&self.threshold_u32),
        };
        let mut params = [
            param(&self.handle),
            param(&self.value),
            threshold,
            param(&self.op),
            param(&self.state),
            param(&self.counter),
            param(&self.max_iterations),
            param(&self.first),
        ];
        f(&mut params)
    }

    fn visit_memory(&self, _: &mut dyn FnMut(&Arc<DeviceMemory>)) -> Result<()> {
        // The value's memory and the state word are kept by the caller.
        Ok(())
    }
}

/// The condition module of each context, loaded once and shared while some graph uses it.
static MODULES: Mutex<Vec<(usize, Weak<super::super::Module>)>> = Mutex::new(Vec::new());

fn condition_module(ctx: &Arc<Context>) -> Result<Arc<super::super::Module>> {
    let mut modules = MODULES.lock().unwrap_or_else(PoisonError::into_inner);
    modules.retain(|(_, module)| module.strong_count() > 0);
    let key = ctx.raw() as usize;
    if let Some(module) = modules
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, m)| m.upgrade())
    {
        return Ok(module);
    }
    crate::image::check_ptx(CONDITIONS_PTX)
        .map_err(|e| Error::invalid_image("the condition kernels", e))?;
    let text = CString::new(CONDITIONS_PTX)
        .map_err(|_| Error::invalid("the condition kernels", "the PTX contains a NUL byte"))?;
    let (module, _log) = super::super::Module::load(ctx, super::super::ModuleImage::Ptx(&text))?;
    let module = Arc::new(module);
    modules.push((key, Arc::downgrade(&module)));
    Ok(module)
}

/// The error of a driver without conditional nodes.
fn unsupported(version: i32) -> Error {
    Error::Unsupported {
        symbol: "cuGraphConditionalHandleCreate",
        reason: format!(
            "device-side `while`/`if` (CUDA conditional graph nodes) need a CUDA 12.4 or newer \
             driver; this one is CUDA {}. Run the step eagerly (`run`), whose loops are driven \
             from the host",
            version_text(version)
        ),
    }
}

impl Graph {
    /// Adds a conditional node to `scope` after `dependencies`, preceded by its condition
    /// kernel: a `while` (`is_while`) or an `if`. Returns the node and the scope of its
    /// body, which is empty; a `while` body must be closed with [`Graph::close_while_body`]
    /// once filled, with `args` as this call leaves them (it sets `args.counter` to device
    /// memory of the node's own). `keep` is what the condition reads and writes (value,
    /// counter, state).
    pub(crate) fn add_conditional(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        is_while: bool,
        args: &mut ConditionArgs,
        keep: Vec<Keep>,
    ) -> Result<(NodeRef, usize, sys::CUgraphConditionalHandle)> {
        const CALL: &str = "Graph::add_conditional_node";
        let d = self.handle.ctx.bind()?;
        if d.version < CONDITIONAL_DRIVER {
            return Err(unsupported(d.version));
        }
        let create = d.optional(
            d.cuGraphConditionalHandleCreate,
            "cuGraphConditionalHandleCreate",
        )?;
        let add = d.optional(d.cuGraphAddNode, "cuGraphAddNode")?;
        let target = self.scope_raw(CALL, scope)?;
        self.own(CALL, dependencies)?;
        let ctx = self.handle.ctx.raw();
        let mut handle: sys::CUgraphConditionalHandle = 0;
        {
            let _guard = self.handle.lock();
            // SAFETY: a live graph (or body) of `ctx`, a valid out-pointer; no default value
            // (the condition kernel sets the handle before the node in every launch).
            check("cuGraphConditionalHandleCreate", unsafe {
                create(&mut handle, target, ctx, 0, 0)
            })?;
        }
        let module = condition_module(&self.handle.ctx)?;
        // The iteration count stays in device memory while the loop runs; the kernel
        // writes it to the host-visible state word once, when the loop ends.
        let counter = Arc::new(DeviceMemory::alloc(&self.handle.ctx, 4)?);
        args.counter = counter.ptr();
        self.retain(keep);
        self.retain([Keep::Object(module.clone()), Keep::Device(counter)]);
        let first = self.add_condition_kernel(scope, dependencies, &module, handle, args, true)?;
        let mut params = sys::CUgraphNodeParams {
            type_: CUgraphNodeType::CONDITIONAL,
            reserved0: [0; 3],
            u: sys::CUgraphNodeParams_u { reserved1: [0; 29] },
            reserved2: 0,
        };
        params.u.conditional = sys::CUDA_CONDITIONAL_NODE_PARAMS {
            handle,
            type_: if is_while {
                sys::CU_GRAPH_COND_TYPE_WHILE
            } else {
                sys::CU_GRAPH_COND_TYPE_IF
            },
            size: 1,
            phGraph_out: std::ptr::null_mut(),
            ctx,
        };
        let mut node = std::ptr::null_mut();
        let body = {
            let _guard = self.handle.lock();
            // SAFETY: a live graph (or body) of `ctx`, one node of it, no edge data, and
            // zeroed parameters but for the conditional member (the driver's rule); the call
            // writes the body array into `params`.
            check("cuGraphAddNode", unsafe {
                add(
                    &mut node,
                    target,
                    &first.raw,
                    std::ptr::null(),
                    1,
                    &mut params,
                )
            })?;
            // SAFETY: the union member we wrote, which the call filled in.
            let bodies = unsafe { params.u.conditional.phGraph_out };
            if bodies.is_null() {
                return Err(Error::invalid(
                    CALL,
                    "the driver returned no body graph for the conditional node",
                ));
            }
            // SAFETY: a driver-owned array of `size == 1` body graphs, valid while the node
            // lives (the node dies with this graph).
            unsafe { *bodies }
        };
        self.bodies.push(body);
        Ok((self.node(node), self.bodies.len(), handle))
    }

    /// Ends the body of a `while` with the condition kernel that decides whether the loop runs
    /// again, after every node of the body that nothing in it depends on.
    pub(crate) fn close_while_body(
        &mut self,
        body: usize,
        handle: sys::CUgraphConditionalHandle,
        args: &ConditionArgs,
    ) -> Result<()> {
        let sinks = self.sinks(body)?;
        let module = condition_module(&self.handle.ctx)?;
        self.add_condition_kernel(body, &sinks, &module, handle, args, false)?;
        Ok(())
    }

    fn add_condition_kernel(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        module: &Arc<super::super::Module>,
        handle: sys::CUgraphConditionalHandle,
        args: &ConditionArgs,
        first: bool,
    ) -> Result<NodeRef> {
        let function = module
            .function("the condition kernels", args.kind.entry())?
            .ok_or_else(|| {
                Error::invalid(
                    "the condition kernels",
                    format!("`{}` is missing from the module", args.kind.entry()),
                )
            })?;
        let config = LaunchConfig::new(1u32, 1u32);
        self.add_kernel_node(
            scope,
            dependencies,
            &function,
            &config,
            &KernelArgs::new(handle, args, first),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_kernels_pass_the_ptx_check_and_declare_every_entry() {
        let entries = crate::image::check_ptx(CONDITIONS_PTX).expect("valid PTX");
        for kind in [
            ConditionKind::F32,
            ConditionKind::F64,
            ConditionKind::U32,
            ConditionKind::Every,
        ] {
            assert!(
                entries.iter().any(|e| e == kind.entry()),
                "{} in {entries:?}",
                kind.entry()
            );
        }
    }
}
