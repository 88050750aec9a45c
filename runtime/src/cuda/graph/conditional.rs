//! Conditional nodes (device-side `while`, `do ... while`, `if`, `if`/`else` and `switch`,
//! CUDA 12.4+ drivers): a conditional handle,
//! the node with its body graph, and the library's condition kernels
//! (`runtime/kernels/conditions.cu`) that set the handle.
//!
//! Layout of a `while` in its graph: `K0 -> WHILE(body)`, with the body ending in `K`. `K0`
//! evaluates the condition before the first iteration (0 iterations done), `K` after each
//! iteration; both count iterations in device memory of the node's own and stop the loop once
//! it has run `max_iterations` times while the condition still holds, marking the loop's state
//! word so that the host reports it. An `if` is `K0 -> IF(body)`, an `if`/`else`
//! `K0 -> IF(then, else)` and a switch `K0 -> SWITCH(case 0, ..)` on a CUDA 12.8+ driver
//! (before: `K0 -> K0' -> IF -> IF`, `K0'` on the negation, and one `K0` per case then one IF
//! per case). A do-while is `WHILE(body)` alone: its handle starts each launch at 1
//! (`CU_GRAPH_COND_ASSIGN_DEFAULT`), and the body's `K` decides. In a body, where the node
//! may be reached again in one launch (an outer loop's next iteration), a kernel sets the
//! handle to 1 before it: the default is applied once per launch of the whole graph. Other
//! handles are created
//! without a default value: `K0` sets the handle in every launch before the node reads it.
//!
//! `K0` and `K` are the specialised kernels of their comparison and value type (`gp_if_*`
//! for an `if`, `if`/`else` or switch: load the value, set the handle, nothing else;
//! `gp_loop_*` for a loop: the value and the count loaded together, the state word written
//! only when a run's count differs from the last one written). The several-IF forms of older
//! drivers and ping-pong loops use the generic `gp_cond_*` kernels, which take the comparison
//! and their role as numbers.

use std::ffi::c_void;
use std::sync::{Mutex, Weak};

use super::*;
use crate::driver::version_text;
use crate::vocab::condition::Form;

mod ping_pong;

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
    /// The first element of a `u32` itself (a switch's value; non-zero holds).
    Value,
}

/// The specialised kernels' names for the comparisons, indexed by `Comparison::code`.
const COMPARISONS: [&str; 6] = ["gt", "ge", "lt", "le", "eq", "ne"];

/// Which kind of condition kernel a node gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A generic `gp_cond_*` kernel with these flags (`FIRST`, `NEGATE`, ..).
    Generic(u32),
    /// A specialised `gp_if_*` kernel: decides an `if`, `if`/`else` or switch.
    Decide,
    /// A specialised `gp_loop_*` kernel: decides and counts a loop's test, `first` before the
    /// loop's first iteration.
    Count { first: bool },
}

impl ConditionKind {
    /// The kernel's name for `role`; `op` is the comparison's number.
    fn entry(self, role: Role, op: u32) -> String {
        let family = match role {
            Role::Generic(_) => {
                let generic = match self {
                    ConditionKind::F32 => "gp_cond_f32",
                    ConditionKind::F64 => "gp_cond_f64",
                    ConditionKind::U32 => "gp_cond_u32",
                    ConditionKind::Every => "gp_cond_every",
                    ConditionKind::Value => "gp_cond_value",
                };
                return generic.to_owned();
            }
            Role::Decide => "gp_if",
            Role::Count { .. } => "gp_loop",
        };
        let comparison = COMPARISONS.get(op as usize).copied().unwrap_or("ne");
        match self {
            ConditionKind::F32 => format!("{family}_{comparison}_f32"),
            ConditionKind::F64 => format!("{family}_{comparison}_f64"),
            ConditionKind::U32 => format!("{family}_{comparison}_u32"),
            ConditionKind::Every => format!("{family}_every"),
            ConditionKind::Value => format!("{family}_value"),
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
    /// The device memory the condition kernel counts iterations in (`COUNTER_BYTES`), set by
    /// [`Graph::add_conditional`] for the nodes that count (0 before, and for an `if`,
    /// `if`/`else` or switch on a CUDA 12.8+ driver): counting in the state word itself would
    /// read host memory across the bus at every iteration.
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
    role: Role,
}

impl KernelArgs {
    fn new(handle: u64, args: &ConditionArgs, role: Role) -> KernelArgs {
        let first = match role {
            Role::Generic(flags) => flags,
            Role::Decide => 0,
            Role::Count { first } => u32::from(first),
        };
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
            first,
            role,
        }
    }
}

fn param<T>(value: &T) -> *mut c_void {
    (value as *const T).cast_mut().cast()
}

impl CudaArgs for KernelArgs {
    fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        let threshold = match self.kind {
            ConditionKind::F32 => param(&self.threshold_f32),
            ConditionKind::F64 => param(&self.threshold_f64),
            ConditionKind::U32 | ConditionKind::Every | ConditionKind::Value => {
                param(&self.threshold_u32)
            }
        };
        let counting = [
            param(&self.state),
            param(&self.counter),
            param(&self.max_iterations),
            param(&self.first),
        ];
        let mut params = [std::ptr::null_mut(); 8];
        params[0] = param(&self.handle);
        params[1] = param(&self.value);
        // The specialised kernels: (handle, value), then the threshold of a comparison, or
        // the modulus and remainder of `every`, then for a loop (state, counter,
        // max_iterations, first).
        let mut n = 2;
        let tail: &[*mut c_void] = match self.role {
            // (handle: u64, value: u64, threshold: f32 | f64 | u32, op: u32, state: u64,
            // iterations: u64, max_iterations: u32, first: u32), as every `gp_cond_*` entry
            // declares them.
            Role::Generic(_) => {
                params[2] = threshold;
                params[3] = param(&self.op);
                n = 4;
                &counting
            }
            Role::Decide | Role::Count { .. } => {
                match self.kind {
                    ConditionKind::F32 | ConditionKind::F64 | ConditionKind::U32 => {
                        params[2] = threshold;
                        n = 3;
                    }
                    ConditionKind::Every => {
                        params[2] = threshold;
                        params[3] = param(&self.op);
                        n = 4;
                    }
                    ConditionKind::Value => {}
                }
                if self.role == Role::Decide {
                    &[]
                } else {
                    &counting
                }
            }
        };
        params[n..n + tail.len()].copy_from_slice(tail);
        f(&mut params[..n + tail.len()])
    }

    fn visit_memory(&self, _: impl FnMut(&Arc<DeviceMemory>)) -> Result<()> {
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

/// Keeps the condition module of a context loaded while a pipeline with device control flow
/// lives: the cache above holds it only while some graph does, so a step captured, dropped
/// and captured again (graphConditionalNodes does it per call) would unload the module with
/// the first graph (a context synchronize) and load it again for the next (`cuModuleLoadData`
/// of the PTX).
pub(crate) fn keep_condition_module(ctx: &Arc<Context>) -> Option<Arc<super::super::Module>> {
    match condition_module(ctx) {
        Ok(module) => Some(module),
        Err(e) => {
            // A driver without conditional nodes: the capture that needs them reports it.
            tracing::debug!(error = %e, "the condition kernels were not loaded ahead");
            None
        }
    }
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

/// The condition kernel's `flags`: bit 0 set before the node (0 iterations done), bit 1
/// negates the condition (the `else` of an `if`/`else` built from two IF nodes), bit 3 ends
/// a ping-pong body after its middle test, bit 4 decides without counting.
const FIRST: u32 = 1;
const NEGATE: u32 = 2;
const AFTER_MIDDLE: u32 = 8;
const DECIDE_ONLY: u32 = 16;

/// The first driver whose conditional nodes take an IF of two bodies and a SWITCH.
const SWITCH_DRIVER: i32 = 12080;

/// The bytes of a counting node's device words: the running count, the count of the last run
/// (a ping-pong loop's parity), the count last written to the state word, and one unused.
const COUNTER_BYTES: usize = 16;

/// A conditional node just added: the node later nodes follow, the scopes of its bodies, and
/// the loop body that still needs its closing condition kernel.
pub(crate) struct Added {
    pub(crate) node: NodeRef,
    pub(crate) bodies: Vec<usize>,
    pub(crate) close: Option<(usize, sys::CUgraphConditionalHandle)>,
}

impl Graph {
    /// A conditional handle of `scope` (the graph or body that will hold its node), starting
    /// each launch at `default` when `assign_default`.
    pub(crate) fn condition_handle(
        &mut self,
        scope: usize,
        default: u32,
        assign_default: bool,
    ) -> Result<sys::CUgraphConditionalHandle> {
        const CALL: &str = "Graph::condition_handle";
        let d = self.handle.ctx.bind()?;
        if d.version < CONDITIONAL_DRIVER {
            return Err(unsupported(d.version));
        }
        let create = d.optional(
            d.cuGraphConditionalHandleCreate,
            "cuGraphConditionalHandleCreate",
        )?;
        let target = self.scope_raw(CALL, scope)?;
        let ctx = self.handle.ctx.raw();
        let flags = if assign_default {
            sys::CU_GRAPH_COND_ASSIGN_DEFAULT
        } else {
            0
        };
        let mut handle: sys::CUgraphConditionalHandle = 0;
        let _guard = self.handle.lock();
        // SAFETY: a live graph (or body) of `ctx`, a valid out-pointer.
        check("cuGraphConditionalHandleCreate", unsafe {
            create(&mut handle, target, ctx, default, flags)
        })?;
        Ok(handle)
    }

    /// Adds a conditional node of `form` with `count` bodies (1, 2 for an `if`/`else`, the
    /// cases of a switch) to `scope` after `dependencies`, its handle set by the library's
    /// condition kernel with `args` (their `counter` is set here). Returns the node and the scopes of its bodies, which are empty; a loop body must
    /// be closed with [`Graph::close_while_body`] once filled (`Added::close`). `keep` is
    /// what the condition reads and writes (value, counter, state).
    ///
    /// A library-decided node is preceded by its condition kernel (none for a do-while,
    /// whose handle starts each launch at 1). On a driver older than 12.8 an `if`/`else` is
    /// two IF nodes on a condition and its negation, and a switch one IF per case, every
    /// condition evaluated before any body runs (a body may change the value).
    pub(crate) fn add_conditional(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        form: Form,
        count: usize,
        args: &mut ConditionArgs,
        keep: Vec<Keep>,
    ) -> Result<Added> {
        const CALL: &str = "Graph::add_conditional_node";
        let d = self.handle.ctx.bind()?;
        if d.version < CONDITIONAL_DRIVER {
            return Err(unsupported(d.version));
        }
        let native = d.version >= SWITCH_DRIVER;
        let target = self.scope_raw(CALL, scope)?;
        self.own(CALL, dependencies)?;
        let deps = dependencies.to_vec();
        self.retain(keep);
        let is_loop = matches!(form, Form::While | Form::DoWhile);
        let module = condition_module(&self.handle.ctx)?;
        self.retain([Keep::Object(module.clone())]);
        // The several-IF forms of older drivers use the generic kernels, which keep a count
        // (always 0 for them) in the same words as a loop's.
        let several = !native && matches!(form, Form::IfElse | Form::Switch);
        if is_loop || several {
            // The iteration count stays in device memory while the loop runs; the kernel
            // writes it to the host-visible state word when the loop ends (and zeroes the
            // count then, so that a do-while, which has no kernel before it, starts at 0).
            self.add_counter(args)?;
        }
        let args = *args;
        match form {
            Form::DoWhile => {
                let handle = self.condition_handle(scope, 1, true)?;
                let deps = self.restart_do_while(scope, &deps, &module, handle, args.counter)?;
                let (node, bodies) = self.conditional_node(target, &deps, handle, form, 1)?;
                let close = Some((bodies[0], handle));
                Ok(Added {
                    node,
                    bodies,
                    close,
                })
            }
            Form::IfElse if !native => {
                let (then, otherwise) = (
                    self.condition_handle(scope, 0, false)?,
                    self.condition_handle(scope, 0, false)?,
                );
                let k1 = self.add_condition_kernel(
                    scope,
                    &deps,
                    &module,
                    then,
                    &args,
                    Role::Generic(FIRST),
                )?;
                let k2 = self.add_condition_kernel(
                    scope,
                    &[k1],
                    &module,
                    otherwise,
                    &args,
                    Role::Generic(FIRST | NEGATE),
                )?;
                let (n1, mut bodies) = self.conditional_node(target, &[k2], then, Form::If, 1)?;
                let (n2, more) = self.conditional_node(target, &[n1], otherwise, Form::If, 1)?;
                bodies.extend(more);
                Ok(Added {
                    node: n2,
                    bodies,
                    close: None,
                })
            }
            Form::Switch if !native => {
                // One IF per case, each on `value == case`.
                let mut handles = Vec::with_capacity(count);
                let mut last = deps.clone();
                for case in 0..count {
                    let handle = self.condition_handle(scope, 0, false)?;
                    let case_args = ConditionArgs {
                        kind: ConditionKind::U32,
                        threshold: case as u64,
                        op: crate::vocab::condition::Comparison::Equal.code(),
                        ..args
                    };
                    let k = self.add_condition_kernel(
                        scope,
                        &last,
                        &module,
                        handle,
                        &case_args,
                        Role::Generic(FIRST),
                    )?;
                    last = vec![k];
                    handles.push(handle);
                }
                let mut bodies = Vec::with_capacity(count);
                for handle in handles {
                    let (node, body) = self.conditional_node(target, &last, handle, Form::If, 1)?;
                    last = vec![node];
                    bodies.extend(body);
                }
                let node = last
                    .first()
                    .copied()
                    .ok_or_else(|| Error::invalid(CALL, "a switch needs at least one case"))?;
                Ok(Added {
                    node,
                    bodies,
                    close: None,
                })
            }
            _ => {
                let handle = self.condition_handle(scope, 0, false)?;
                let role = if is_loop {
                    Role::Count { first: true }
                } else {
                    Role::Decide
                };
                let first =
                    self.add_condition_kernel(scope, &deps, &module, handle, &args, role)?;
                let (node, bodies) =
                    self.conditional_node(target, &[first], handle, form, count)?;
                let close = is_loop.then(|| (bodies[0], handle));
                Ok(Added {
                    node,
                    bodies,
                    close,
                })
            }
        }
    }

    /// Adds a conditional node of `form` whose `handle` (made by [`Graph::condition_handle`])
    /// kernels set themselves: no condition kernel before it or at the end of a loop's body.
    /// On a driver before 12.8 an `if`/`else` or a switch is built as
    /// [`Graph::add_conditional`] builds it, its library kernels reading the value the kernel
    /// wrote to its word (`args`), and `handle` is left unused. `keep` is the word and state.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_kernel_set_conditional(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        form: Form,
        count: usize,
        handle: sys::CUgraphConditionalHandle,
        args: &mut ConditionArgs,
        keep: Vec<Keep>,
    ) -> Result<Added> {
        const CALL: &str = "Graph::add_conditional_node";
        let d = self.handle.ctx.bind()?;
        if d.version < CONDITIONAL_DRIVER {
            return Err(unsupported(d.version));
        }
        if matches!(form, Form::IfElse | Form::Switch) && d.version < SWITCH_DRIVER {
            return self.add_conditional(scope, dependencies, form, count, args, keep);
        }
        let target = self.scope_raw(CALL, scope)?;
        self.own(CALL, dependencies)?;
        self.retain(keep);
        let deps = if form == Form::DoWhile && scope != 0 {
            let module = condition_module(&self.handle.ctx)?;
            self.retain([Keep::Object(module.clone())]);
            // `args.value` is the handle's word, which `keep` holds.
            self.restart_do_while(scope, dependencies, &module, handle, args.value)?
        } else {
            dependencies.to_vec()
        };
        let (node, bodies) = self.conditional_node(target, &deps, handle, form, count)?;
        Ok(Added {
            node,
            bodies,
            close: None,
        })
    }

    /// One conditional node of `form` on `handle` in `target` after `dependencies`, with
    /// `count` empty bodies, whose scopes it returns.
    fn conditional_node(
        &mut self,
        target: sys::CUgraph,
        dependencies: &[NodeRef],
        handle: sys::CUgraphConditionalHandle,
        form: Form,
        count: usize,
    ) -> Result<(NodeRef, Vec<usize>)> {
        const CALL: &str = "Graph::add_conditional_node";
        let d = self.handle.ctx.bind()?;
        let add = d.optional(d.cuGraphAddNode, "cuGraphAddNode")?;
        let (type_, size) = match form {
            Form::If => (sys::CU_GRAPH_COND_TYPE_IF, 1),
            Form::IfElse => (sys::CU_GRAPH_COND_TYPE_IF, 2),
            Form::While | Form::DoWhile | Form::PingPong | Form::DoPingPong => {
                (sys::CU_GRAPH_COND_TYPE_WHILE, 1)
            }
            Form::Switch => (sys::CU_GRAPH_COND_TYPE_SWITCH, count),
        };
        if size == 0 {
            return Err(Error::invalid(CALL, "a switch needs at least one case"));
        }
        let size = u32::try_from(size)
            .map_err(|_| Error::invalid(CALL, "a switch has more cases than CUDA counts"))?;
        let mut params = sys::CUgraphNodeParams {
            type_: CUgraphNodeType::CONDITIONAL,
            reserved0: [0; 3],
            u: sys::CUgraphNodeParams_u { reserved1: [0; 29] },
            reserved2: 0,
        };
        params.u.conditional = sys::CUDA_CONDITIONAL_NODE_PARAMS {
            handle,
            type_,
            size,
            phGraph_out: std::ptr::null_mut(),
            ctx: self.handle.ctx.raw(),
        };
        let raw_deps: Vec<sys::CUgraphNode> = dependencies.iter().map(|n| n.raw).collect();
        let mut node = std::ptr::null_mut();
        let bodies: Vec<sys::CUgraph> = {
            let _guard = self.handle.lock();
            // SAFETY: a live graph (or body) of the context, nodes of it (checked by the
            // caller), no edge data, and zeroed parameters but for the conditional member
            // (the driver's rule); the call writes the body array into `params`.
            check("cuGraphAddNode", unsafe {
                add(
                    &mut node,
                    target,
                    raw_deps.as_ptr(),
                    std::ptr::null(),
                    raw_deps.len(),
                    &mut params,
                )
            })?;
            // SAFETY: the union member we wrote, which the call filled in.
            let out = unsafe { params.u.conditional.phGraph_out };
            if out.is_null() {
                return Err(Error::invalid(
                    CALL,
                    "the driver returned no body graph for the conditional node",
                ));
            }
            // SAFETY: a driver-owned array of `size` body graphs, valid while the node lives
            // (the node dies with this graph).
            unsafe { std::slice::from_raw_parts(out, size as usize) }.to_vec()
        };
        let scope = self.scope_of(target);
        self.loops.conditional(scope, node);
        let mut scopes = Vec::with_capacity(bodies.len());
        for body in bodies {
            self.bodies.push(body);
            self.loops.body(self.bodies.len(), scope);
            scopes.push(self.bodies.len());
        }
        if type_ == sys::CU_GRAPH_COND_TYPE_WHILE {
            self.loops.add_loop(scope);
        }
        Ok((self.node(node), scopes))
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
        let role = Role::Count { first: false };
        self.add_condition_kernel(body, &sinks, &module, handle, args, role)?;
        Ok(())
    }

    /// What a do-while node in `scope` follows instead of `dependencies`: in a body, a kernel
    /// that sets its `handle` to 1. The handle's default (`CU_GRAPH_COND_ASSIGN_DEFAULT`) is
    /// applied once per launch of the whole graph, not each time an outer loop reaches the
    /// node again, so from the second time on the handle would still hold the 0 that ended
    /// the loop's last run, and the body would not run at all. At the top of the graph the
    /// node runs once per launch (a graph with conditional nodes cannot be a child graph), so
    /// the default does it there with no kernel. `word` is device memory the graph keeps: the
    /// kernel reads it and holds for any value (`word % 1 == 0`).
    fn restart_do_while(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        module: &Arc<super::super::Module>,
        handle: sys::CUgraphConditionalHandle,
        word: sys::CUdeviceptr,
    ) -> Result<Vec<NodeRef>> {
        if scope == 0 {
            return Ok(dependencies.to_vec());
        }
        let always = ConditionArgs {
            kind: ConditionKind::Every,
            value: word,
            threshold: 1,
            op: 0,
            state: 0,
            counter: 0,
            max_iterations: u32::MAX,
        };
        let set = self.add_condition_kernel(
            scope,
            dependencies,
            module,
            handle,
            &always,
            Role::Generic(DECIDE_ONLY),
        )?;
        Ok(vec![set])
    }

    /// Zeroed device words (`COUNTER_BYTES`) that the graph keeps, for the condition kernels
    /// of one node to count in: sets `args.counter`.
    fn add_counter(&mut self, args: &mut ConditionArgs) -> Result<()> {
        // Zeroed on the legacy stream, which the streams a launch may use do not wait for:
        // settled before any instantiation of the graph is returned.
        let counter = Arc::new(DeviceMemory::alloc_zeroing(
            &self.handle.ctx,
            COUNTER_BYTES,
        )?);
        self.zeroed_on_legacy();
        args.counter = counter.ptr();
        self.retain([Keep::Device(counter)]);
        Ok(())
    }

    /// A condition kernel node (grid 1, block 1: the kernels do not check their thread).
    fn add_condition_kernel(
        &mut self,
        scope: usize,
        dependencies: &[NodeRef],
        module: &Arc<super::super::Module>,
        handle: sys::CUgraphConditionalHandle,
        args: &ConditionArgs,
        role: Role,
    ) -> Result<NodeRef> {
        let entry = args.kind.entry(role, args.op);
        let function = module
            .function("the condition kernels", &entry)?
            .ok_or_else(|| {
                Error::invalid(
                    "the condition kernels",
                    format!("`{entry}` is missing from the module"),
                )
            })?;
        let config = LaunchConfig::new(1u32, 1u32);
        self.add_kernel_node(
            scope,
            dependencies.iter().copied(),
            &function,
            &config,
            &KernelArgs::new(handle, args, role),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::vocab::condition::Comparison;

    const KINDS: [ConditionKind; 5] = [
        ConditionKind::F32,
        ConditionKind::F64,
        ConditionKind::U32,
        ConditionKind::Every,
        ConditionKind::Value,
    ];

    const ALL: [Comparison; 6] = [
        Comparison::Greater,
        Comparison::GreaterOrEqual,
        Comparison::Less,
        Comparison::LessOrEqual,
        Comparison::Equal,
        Comparison::NotEqual,
    ];

    #[test]
    fn the_condition_kernels_pass_the_ptx_check_and_declare_every_entry() {
        let entries = crate::image::check_ptx(CONDITIONS_PTX).expect("valid PTX");
        let roles = [
            Role::Generic(FIRST),
            Role::Decide,
            Role::Count { first: true },
            Role::Count { first: false },
        ];
        for kind in KINDS {
            for role in roles {
                for comparison in ALL {
                    let entry = kind.entry(role, comparison.code());
                    assert!(entries.contains(&entry), "{entry} in {entries:?}");
                }
            }
        }
    }

    /// The names of the specialised kernels say what they compare (`gp_if_gt_f32` tests
    /// `value > threshold`), as `Comparison::code` numbers the comparisons.
    #[test]
    fn each_comparison_gets_its_own_kernel() {
        let names = ["gt", "ge", "lt", "le", "eq", "ne"];
        let symbols = [">", ">=", "<", "<=", "==", "!="];
        for comparison in ALL {
            let at = symbols
                .iter()
                .position(|s| *s == comparison.symbol())
                .expect("a known symbol");
            let expected = format!("gp_if_{}_u32", names[at]);
            let entry = ConditionKind::U32.entry(Role::Decide, comparison.code());
            assert_eq!(entry, expected, "{comparison:?}");
            let entry = ConditionKind::F64.entry(Role::Count { first: false }, comparison.code());
            assert_eq!(
                entry,
                format!("gp_loop_{}_f64", names[at]),
                "{comparison:?}"
            );
        }
        assert_eq!(ConditionKind::Value.entry(Role::Decide, 0), "gp_if_value");
        assert_eq!(
            ConditionKind::Every.entry(Role::Count { first: true }, 1),
            "gp_loop_every"
        );
        assert_eq!(ConditionKind::F32.entry(Role::Generic(0), 3), "gp_cond_f32");
    }

    /// The parameters each kernel declares, in count and order of size, as `with_params`
    /// passes them.
    #[test]
    fn the_parameters_match_each_kernels_declaration() {
        let args = ConditionArgs {
            kind: ConditionKind::F64,
            value: 1,
            threshold: 2.5f64.to_bits(),
            op: 4,
            state: 3,
            counter: 5,
            max_iterations: 7,
        };
        let count = |kind: ConditionKind, role: Role| {
            let packed = KernelArgs::new(9, &ConditionArgs { kind, ..args }, role);
            packed.with_params(|p| p.len())
        };
        let declared = |entry: &str| {
            let at = CONDITIONS_PTX
                .find(&format!(".entry {entry}("))
                .expect("declared");
            let rest = &CONDITIONS_PTX[at..];
            let end = rest.find(')').expect("closed");
            rest[..end].matches(".param").count()
        };
        for kind in KINDS {
            for role in [Role::Generic(0), Role::Decide, Role::Count { first: true }] {
                let entry = kind.entry(role, 0);
                assert_eq!(count(kind, role), declared(&entry), "{entry}");
            }
        }
        // The loop kernels' last parameter is `first`.
        let packed = KernelArgs::new(9, &args, Role::Count { first: true });
        // SAFETY: parameter 6 of a loop kernel points at `packed.first`, a `u32`.
        let first = packed.with_params(|p| unsafe { *p[6].cast::<u32>() });
        assert_eq!(first, 1);
        // SAFETY: parameter 2 of an `f64` comparison points at `packed.threshold_f64`.
        let threshold = packed.with_params(|p| unsafe { *p[2].cast::<f64>() });
        assert_eq!(threshold, 2.5);
    }
}
