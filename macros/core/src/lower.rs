//! The stage graph: the checked pipeline with every name resolved, each statement's accesses
//! derived and the event wiring computed.
//!
//! Every lowered item keeps a reference to what the user wrote (`decl` on declarations, `source`
//! on statements), so later phases read expressions and spans there instead of searching the
//! syntax tree again. The ordering itself is computed on plain ids by the
//! `gpu-pipeline-schedule` crate, which the runtime shares; [`dot`] renders the result.

pub mod bound;
mod collective;
mod control;
mod dot;
mod statement;

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{Expr, Ident, Type};

use crate::ast::{
    self, BufRef, KernelParamType, bare_ident, token_mentions, type_string, ungroup_expr,
};
use crate::constant;
use crate::scope::{Scope, Value};

use statement::{
    buffer, lower_stage, lower_statement, scalars_read, scalars_with_lets, unresolved,
};

pub use crate::ast::{ImageFormat, Priority, WaitCondition};
pub use crate::scope::Memory;
pub use control::{Control, ControlCondition};
pub use gpu_pipeline_schedule::{
    Access, BufferId, Cycle, Edge, Extent, Hazard, Hop, Mode, Node, ORIGIN, Reason, StageId,
    StreamId, Via, schedule,
};

/// Index into [`Pipeline::scalars`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScalarId(pub usize);

/// Index into [`Pipeline::modules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModuleId(pub usize);

/// Index into [`Pipeline::kernels`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelId(pub usize);

/// One pipeline, lowered.
#[derive(Debug, Clone)]
pub struct Pipeline<'a> {
    /// The input as parsed: name, visibility, attributes, params in declaration order.
    pub input: &'a ast::Pipeline,
    /// The pipeline's name.
    pub name: String,
    /// Declared devices in order (what `new` takes one context each for); empty for a
    /// pipeline on one device.
    pub devices: Vec<String>,
    /// Streams in declaration order; the first is the origin.
    pub streams: Vec<Stream<'a>>,
    /// Kernel modules.
    pub modules: Vec<Module<'a>>,
    /// Kernels over all modules.
    pub kernels: Vec<Kernel<'a>>,
    /// Scalar params.
    pub scalars: Vec<Scalar<'a>>,
    /// Buffer params and scratch buffers.
    pub buffers: Vec<Buffer<'a>>,
    /// Stages in program order.
    pub stages: Vec<Stage<'a>>,
    /// Every cross-stream ordering that data hazards and `after` require, before reduction.
    pub dependencies: Vec<Edge>,
    /// The waits to emit: the transitive reduction of [`Pipeline::dependencies`], given stream
    /// order. Each edge becomes one `cuStreamWaitEvent` on the target's stream.
    pub edges: Vec<Edge>,
    /// An order to enqueue stages in: topological, and program order wherever that is free
    /// (each kind of step's in turn).
    #[cfg_attr(not(test), expect(dead_code, reason = "lowered for the unit tests"))]
    pub order: Vec<StageId>,
    /// Stages that record an event after their last statement: the sources of
    /// [`Pipeline::edges`] and the last stage of each stream in [`Pipeline::join`].
    pub events: Vec<StageId>,
    /// Streams whose first stage waits on the event the origin records at the start of a step.
    pub fork: Vec<StreamId>,
    /// Streams whose last stage the origin waits for at the end of a step.
    pub join: Vec<StreamId>,
    /// `after`s left out of the graph because they would close a cycle. The ordering checks
    /// reject them; the graph above is what the other orderings give.
    pub cycles: Vec<Cycle>,
    /// The kinds of step: the `step` blocks, or one unnamed kind.
    pub kinds: Vec<Kind<'a>>,
    /// The `for` loops.
    pub loops: Vec<&'a ast::ForLoop>,
    /// `swap(a, b)`s, as buffer pairs.
    pub swaps: Vec<(BufferId, BufferId)>,
    /// Whether the step's shape is only known when it is enqueued: a loop, a stream array, a
    /// buffer array, or a range whose bounds are not constants. The ordering above is then a
    /// sketch (each loop stage once, each stream array one stream, each range its whole
    /// buffer), and the runtime orders the stage instances; checks that need the exact order
    /// (`concurrent` claims) run there too.
    pub dynamic: bool,
    /// Scalar params that shape the step (loop bounds, `let`s, stream indices and counts,
    /// subscripts): setting one captures the step again.
    pub structural: BTreeSet<ScalarId>,
}

/// One kind of step.
#[derive(Debug, Clone)]
pub struct Kind<'a> {
    /// The `step` block, or `None` for the one unnamed kind.
    pub decl: Option<&'a ast::StepBlock>,
    /// Its stages, in program order.
    pub stages: Vec<StageId>,
    /// An enqueue order of its stages.
    pub order: Vec<StageId>,
    /// Its stages that record an event.
    pub events: Vec<StageId>,
    /// Streams its step forks.
    pub fork: Vec<StreamId>,
    /// Streams its step joins.
    pub join: Vec<StreamId>,
}

/// A declared stream.
#[derive(Debug, Clone)]
pub struct Stream<'a> {
    /// The declaration.
    pub decl: &'a ast::Stream,
    /// Its name (raw idents unprefixed).
    pub name: String,
    /// Its priority.
    pub priority: Priority,
    /// Whether it was declared `non_blocking` (no implicit sync with the legacy stream).
    pub non_blocking: bool,
    /// `name[COUNT]`: the number of streams of a stream array.
    pub count: Option<&'a Expr>,
    /// Name of the zero-sized marker type that types this stream: pipeline name plus the
    /// stream's name in camel case (`HeatStepCompute`).
    pub marker: String,
    /// The device it runs on (index into [`Pipeline::devices`]; 0 on one device); the first
    /// of its array's devices when `per_device`.
    pub device: usize,
    /// `on gpu[..]`: element `k` of the stream array runs on device `device + k`.
    pub per_device: bool,
}

/// A kernel module.
#[derive(Debug, Clone)]
pub struct Module<'a> {
    /// The declaration, with its image expression.
    pub decl: &'a ast::Module,
    /// How its image is loaded.
    pub format: ImageFormat,
}

/// A kernel.
#[derive(Debug, Clone)]
pub struct Kernel<'a> {
    /// The declaration, with the parameter types as written.
    pub decl: &'a ast::Kernel,
    /// Its module.
    pub module: ModuleId,
    /// Its entry point name.
    pub name: String,
    /// Its parameters, with the bounds of its buffers.
    pub params: Vec<KernelParam<'a>>,
    /// The path of its host implementation, if declared.
    #[cfg_attr(not(test), expect(dead_code, reason = "lowered for the unit tests"))]
    pub host: Option<String>,
}

/// A kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelParam<'a> {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: KernelParamKind<'a>,
}

/// What a kernel takes in one parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelParamKind<'a> {
    /// A value of this type.
    Scalar {
        /// The type as written.
        ty: String,
    },
    /// A buffer of `elem`, read (`&[T]`) or written (`&mut [T]`).
    Slice {
        /// The element type as written.
        elem: String,
        /// How the kernel uses it.
        mode: Mode,
        /// The bound the kernel indexes it below (`&mut [T; n]`), if declared.
        bound: Option<bound::Bound<'a>>,
    },
    /// A condition the kernel sets (`Condition`): its argument is a `Condition` scratch
    /// entry, which the launch writes.
    Condition,
}

/// A scalar param.
#[derive(Debug, Clone)]
pub struct Scalar<'a> {
    /// The declaration.
    pub decl: &'a ast::Param,
    /// Its name.
    pub name: String,
    /// Its type as written.
    pub ty: String,
}

/// A buffer param or scratch buffer.
#[derive(Debug, Clone)]
pub struct Buffer<'a> {
    /// Its name as declared.
    pub ident: &'a Ident,
    /// The type behind the reference (`DeviceBuffer<f32>` for `&mut DeviceBuffer<f32>`).
    pub referent: &'a Type,
    /// The element type, when the type names one.
    pub elem: Option<&'a Type>,
    /// The length expression of a scratch buffer.
    pub len: Option<&'a Expr>,
    /// The scalar params its length expression reads.
    pub len_scalars: BTreeSet<ScalarId>,
    /// Its name.
    pub name: String,
    /// Which memory it is.
    pub memory: Memory,
    /// Whether the pipeline may write it.
    pub mutable: bool,
    /// Whether the pipeline owns it (`scratch`) rather than borrowing it (`params`).
    pub scratch: bool,
    /// The device it lives on (index into [`Pipeline::devices`]; 0 on one device); the first
    /// of its array's devices when `per_device`.
    pub device: usize,
    /// `on gpu[..]`: element `k` of the buffer array lives on device `device + k`.
    pub per_device: bool,
    /// Whether it is a slice of buffers (`&mut [DeviceBuffer<T>]`).
    pub array: bool,
    /// Whether it is a window param (`&mut Window<T>`): a launch reads this rank's part and
    /// writes the neighbours' (`on rank EXPR`), between the signals the macro derives.
    pub window: bool,
}

/// A stage.
#[derive(Debug, Clone)]
pub struct Stage<'a> {
    /// The declaration.
    pub decl: &'a ast::Stage,
    /// Its name.
    pub name: String,
    /// The stream it runs on.
    pub stream: StreamId,
    /// Its statements in order.
    pub statements: Vec<Statement<'a>>,
    /// The buffers it touches, each once; a write covers a read.
    pub accesses: Vec<Access>,
    /// The stages named in its `after` clause.
    pub after: Vec<StageId>,
    /// Its kind of step.
    pub kind: usize,
    /// Its loop, if it is inside one.
    pub looped: Option<usize>,
    /// `on s[EXPR]`: the element of a stream array.
    pub lane: Option<&'a Expr>,
}

/// A statement: what it does, the buffers it touches and the scalars it reads.
#[derive(Debug, Clone)]
pub struct Statement<'a> {
    /// What it does, with the statement as written.
    pub kind: StatementKind<'a>,
    /// The buffers it touches, in the order it names them (a launch may name one twice).
    pub accesses: Vec<Touch<'a>>,
    /// The scalar params its expressions read (arguments, dimensions, values, a closure's
    /// captures): what a replayed graph keeps unless the scalar's setter updates it.
    pub scalars: BTreeSet<ScalarId>,
}

impl Statement<'_> {
    /// Whether this is an in-place `all_reduce` or `broadcast` of `name` (one operand,
    /// written): it reduces, or on its root sends, what the buffer holds, and then writes it.
    pub fn reads_in_place(&self, name: &Ident) -> bool {
        let StatementKind::Comm { source, .. } = &self.kind else {
            return false;
        };
        match &source.op {
            ast::CommOp::AllReduce { src, dst: None, .. }
            | ast::CommOp::Broadcast { src, dst: None, .. } => src.name == *name,
            _ => false,
        }
    }
}

/// One buffer access of a statement, with the name that makes it.
#[derive(Debug, Clone, Copy)]
pub struct Touch<'a> {
    /// The buffer.
    pub buffer: BufferId,
    /// How.
    pub mode: Mode,
    /// The name in the statement that makes the access, for messages.
    pub name: &'a Ident,
    /// The reference with its subscripts, when it has any (`xs[k]`, `x[lo..hi]`).
    pub subscript: Option<BufRef<'a>>,
}

/// What a statement does, with names resolved. `source` is the statement as written.
#[derive(Debug, Clone)]
pub enum StatementKind<'a> {
    /// A kernel launch.
    Launch {
        /// As written: arguments, dimensions.
        source: &'a ast::Launch,
        /// The kernel.
        kernel: KernelId,
        /// One argument per kernel parameter.
        args: Vec<Arg>,
    },
    /// An asynchronous copy.
    Copy {
        /// As written.
        source: &'a ast::Copy,
        /// Read.
        src: BufferId,
        /// Written.
        dst: BufferId,
    },
    /// A memset.
    Fill {
        /// As written, with the value.
        source: &'a ast::Fill,
        /// Written.
        dst: BufferId,
    },
    /// A stream wait on a flag value.
    Wait {
        /// As written, with the value.
        source: &'a ast::Wait,
        /// Read.
        flag: BufferId,
        /// The comparison.
        condition: WaitCondition,
    },
    /// A stream write of a flag value.
    Write {
        /// As written, with the value.
        source: &'a ast::Write,
        /// Written.
        flag: BufferId,
    },
    /// A host closure enqueued in stream order.
    Host {
        /// As written, with the closure and its `reads(...)`/`writes(...)`.
        source: &'a ast::Host,
    },
    /// A communication statement: `send`, `recv` or a collective through the communicator.
    Comm {
        /// As written, with its operands, ranges, peer or root.
        source: &'a ast::Comm,
        /// The communicator param.
        communicator: BufferId,
    },
    /// A Rust function given the stage's stream.
    Call {
        /// As written, with the function, its arguments and its `reads(...)`/`writes(...)`.
        source: &'a ast::Call,
        /// Its arguments, in order.
        args: Vec<CallArg<'a>>,
    },
    /// A device-side `while` or `if` with its body (`lower/control.rs`).
    Control(Box<Control<'a>>),
}

/// One argument of a `call`.
#[derive(Debug, Clone)]
pub enum CallArg<'a> {
    /// `x`, `&x` or `&mut x` for a buffer `x`: passed as a borrow of `mode`.
    Buffer {
        /// The name as written.
        name: &'a Ident,
        /// How it is passed: written only when declared in `writes(...)` and not passed as
        /// `&x`.
        mode: Mode,
        /// How the call declares it.
        declared: Mode,
    },
    /// Any other expression, with the declared buffers it names, each seen as declared.
    Expr {
        /// The expression.
        expr: &'a Expr,
        /// The buffers it names, and how the call declares each.
        buffers: Vec<(BufferId, Mode)>,
    },
}

/// One kernel argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// A buffer for a slice parameter.
    Buffer {
        /// The buffer.
        buffer: BufferId,
        /// How the kernel uses it.
        mode: Mode,
    },
    /// A value for a scalar parameter.
    Scalar {
        /// The kernel's type for it.
        ty: String,
        /// The scalar param, when the argument is a bare param name.
        param: Option<ScalarId>,
        /// Whether phase 2 must assert, at the argument's span, that it has type `ty`: true
        /// for expressions and for params whose declared type is spelled differently.
        assert_type: bool,
    },
}

/// Whether a launch's arguments name a window param: such a launch runs between the
/// window's signals, on its stage's stream, also when a step is built as a graph.
pub fn names_window(buffers: &[Buffer<'_>], args: &[Arg]) -> bool {
    args.iter()
        .any(|arg| matches!(arg, Arg::Buffer { buffer, .. } if buffers[buffer.0].window))
}

/// A name `check` should have rejected but that did not resolve: a bug in this crate,
/// reported as an error on the name rather than a panic.
#[derive(Debug, Clone)]
pub struct Unresolved {
    /// What did not resolve.
    pub what: String,
    /// Where.
    pub span: Span,
}

impl From<Unresolved> for syn::Error {
    fn from(unresolved: Unresolved) -> syn::Error {
        syn::Error::new(
            unresolved.span,
            format!(
                "internal error in `gpu_pipeline!`: `{}` passed the checks but did not resolve; please report this bug",
                unresolved.what
            ),
        )
    }
}

impl Pipeline<'_> {
    /// The edges of kind `kind`'s step built as a graph: stream order and the waits,
    /// transitively reduced together, sorted (see `gpu_pipeline_schedule::stage_edges`).
    pub fn graph_edges(&self, kind: usize) -> Vec<(StageId, StageId)> {
        let Some(kind) = self.kinds.get(kind) else {
            return Vec::new();
        };
        let streams: Vec<StreamId> = self.stages.iter().map(|stage| stage.stream).collect();
        let waits: Vec<Edge> = self
            .edges
            .iter()
            .filter(|edge| kind.stages.contains(&edge.to))
            .cloned()
            .collect();
        gpu_pipeline_schedule::stage_edges(&streams, &kind.order, &waits)
    }

    /// A shortest path of orderings from `from` to `to`, if `to` runs after `from`.
    /// Stages of different kinds of step are never ordered here: each kind is its own step.
    pub fn path(&self, from: StageId, to: StageId) -> Option<Vec<Hop>> {
        // Each kind gets its own stream numbers, so stream order never links two kinds.
        let count = self.streams.len().max(1);
        let streams: Vec<StreamId> = self
            .stages
            .iter()
            .map(|stage| StreamId(stage.stream.0 + stage.kind * count))
            .collect();
        let mut hops = gpu_pipeline_schedule::path(&streams, &self.dependencies, from, to)?;
        for hop in &mut hops {
            if let Via::Stream(stream) = &mut hop.via {
                *stream = StreamId(stream.0 % count);
            }
        }
        Some(hops)
    }
}

/// Lowers a pipeline whose declarations passed the checks.
pub fn lower<'a>(scope: &Scope<'a>) -> Result<Pipeline<'a>, Unresolved> {
    let input = scope.input;
    let streams = scope
        .streams
        .iter()
        .enumerate()
        .map(|(id, &decl)| Stream {
            decl,
            name: name(&decl.name),
            priority: decl
                .priority
                .as_ref()
                .map_or(Priority::Default, |option| option.level),
            non_blocking: decl.non_blocking.is_some(),
            count: decl.count.as_ref(),
            marker: marker(&input.name, &decl.name),
            device: scope.stream_device(id),
            per_device: scope.stream_per_device(id),
        })
        .collect::<Vec<_>>();
    let modules = scope
        .modules
        .iter()
        .map(|&decl| Module {
            decl,
            format: decl.format,
        })
        .collect();
    let kernels = scope
        .kernels
        .iter()
        .map(|kernel| lower_kernel(kernel.module, kernel.decl))
        .collect::<Result<_, _>>()?;
    let scalars = scope
        .scalars
        .iter()
        .map(|&decl| Scalar {
            decl,
            name: name(&decl.name),
            ty: type_string(&decl.ty),
        })
        .collect();
    let buffers = scope
        .buffers
        .iter()
        .enumerate()
        .map(|(id, buffer)| Buffer {
            ident: buffer.name,
            referent: buffer.referent,
            elem: buffer.elem,
            len: buffer.len,
            len_scalars: buffer
                .len
                .map(|len| scalars_read(scope, len.to_token_stream()))
                .unwrap_or_default(),
            name: name(buffer.name),
            memory: buffer.memory,
            mutable: buffer.mutable,
            scratch: buffer.scratch,
            device: scope.buffer_device(id),
            per_device: scope.buffer_per_device(id),
            array: buffer.array,
            window: buffer.is_window(),
        })
        .collect::<Vec<Buffer<'a>>>();
    let stages: Vec<Stage<'a>> = scope
        .stages
        .iter()
        .enumerate()
        .map(|(id, &stage)| lower_stage(scope, id, stage))
        .collect::<Result<_, _>>()?;
    let swaps = input
        .swaps()
        .map(|swap| Ok((buffer(scope, &swap.a)?, buffer(scope, &swap.b)?)))
        .collect::<Result<_, Unresolved>>()?;
    let loops = scope.loops.clone();
    let dynamic = !loops.is_empty()
        || streams.iter().any(|s| s.count.is_some())
        || buffers.iter().any(|b| b.array)
        || stages.iter().any(|stage| {
            stage.statements.iter().any(|statement| {
                statement
                    .accesses
                    .iter()
                    .filter_map(|touch| touch.subscript)
                    .any(|r| r.index.is_some() || extent(&r).is_none())
            })
        });
    let structural = structural_scalars(scope);

    // Each kind of step is ordered on its own; the pipeline-wide lists hold them all.
    let mut all = Vec::new();
    let mut kinds = Vec::new();
    for (kind, decl) in scope.kinds.iter().enumerate() {
        let members: Vec<usize> = (0..stages.len())
            .filter(|&id| stages[id].kind == kind)
            .collect();
        let local = |global: StageId| members.iter().position(|&m| m == global.0);
        let mut nodes: Vec<Node> = members
            .iter()
            .map(|&id| {
                let stage = &stages[id];
                Node {
                    stream: stage.stream,
                    accesses: stage.accesses.clone(),
                    // `after` across kinds is rejected by the checks; left out here.
                    after: stage
                        .after
                        .iter()
                        .filter_map(|&a| local(a).map(StageId))
                        .collect(),
                }
            })
            .collect();
        let (one, cycles) = match schedule(scope.streams.len(), &nodes) {
            Ok(one) => (one, Vec::new()),
            Err(cycles) => {
                // `schedule` judges each `after` naming a later stage against the orderings
                // kept so far; without the ones it rejected it keeps the same ones again and
                // succeeds.
                for cycle in cycles.iter().rev() {
                    nodes[cycle.stage.0].after.remove(cycle.after);
                }
                let one = schedule(scope.streams.len(), &nodes).map_err(|_| Unresolved {
                    what: "the stage graph without its cycles".to_owned(),
                    span: input.name.span(),
                })?;
                (one, cycles)
            }
        };
        let global = |s: StageId| StageId(members[s.0]);
        let global_edge = |e: &Edge| Edge {
            from: global(e.from),
            to: global(e.to),
            reasons: e.reasons.clone(),
        };
        let cycles: Vec<Cycle> = cycles
            .into_iter()
            .map(|cycle| Cycle {
                stage: global(cycle.stage),
                after: cycle.after,
                path: cycle
                    .path
                    .iter()
                    .map(|hop| Hop {
                        from: global(hop.from),
                        to: global(hop.to),
                        via: hop.via,
                    })
                    .collect(),
            })
            .collect();
        kinds.push(Kind {
            decl: *decl,
            stages: members.iter().map(|&m| StageId(m)).collect(),
            order: one.order.iter().map(|&s| global(s)).collect(),
            events: one.events.iter().map(|&s| global(s)).collect(),
            fork: one.fork.clone(),
            join: one.join.clone(),
        });
        all.push((
            one.dependencies.iter().map(global_edge).collect::<Vec<_>>(),
            one.edges.iter().map(global_edge).collect::<Vec<_>>(),
            cycles,
        ));
    }
    let mut dependencies = Vec::new();
    let mut edges = Vec::new();
    let mut cycles = Vec::new();
    for (d, e, c) in all {
        dependencies.extend(d);
        edges.extend(e);
        cycles.extend(c);
    }
    let order = kinds.iter().flat_map(|k| k.order.clone()).collect();
    let mut events: Vec<StageId> = kinds.iter().flat_map(|k| k.events.clone()).collect();
    events.sort();
    let (fork, join) = kinds
        .first()
        .map(|k| (k.fork.clone(), k.join.clone()))
        .unwrap_or_default();
    Ok(Pipeline {
        input,
        name: name(&input.name),
        devices: scope.device_names(),
        streams,
        modules,
        kernels,
        scalars,
        buffers,
        stages,
        dependencies,
        edges,
        order,
        events,
        fork,
        join,
        cycles,
        kinds,
        loops,
        swaps,
        dynamic,
        structural,
    })
}

/// The constant element range a reference names, when it names one: `x[2..8]`; `Some(None)`
/// for no range at all. `None` when a bound is not a constant.
pub fn extent(reference: &BufRef<'_>) -> Option<Option<Extent>> {
    let Some(range) = reference.range else {
        return Some(None);
    };
    let start = match range.start {
        Some(start) => u64::try_from(constant::value(start)?).ok()?,
        None => 0,
    };
    // An open end runs to the buffer's end, which the macro does not know.
    let end = u64::try_from(constant::value(range.end?)?).ok()?;
    Some(Some(Extent::new(start, end)))
}

/// The scalar params that shape a step: loop bounds, `let`s, stream counts and indices, and
/// buffer subscripts. A replayed graph keeps the shape it was captured with.
fn structural_scalars(scope: &Scope<'_>) -> BTreeSet<ScalarId> {
    let mut tokens = TokenStream::new();
    for body in &scope.loops {
        body.start.to_tokens(&mut tokens);
        body.end.to_tokens(&mut tokens);
        for binding in &body.lets {
            binding.value.to_tokens(&mut tokens);
        }
    }
    for stream in &scope.streams {
        stream.count.to_tokens(&mut tokens);
    }
    for stage in &scope.stages {
        stage.lane.to_tokens(&mut tokens);
        subscripts_into(scope, &stage.statements, &mut tokens);
    }
    scalars_read(scope, tokens)
}

/// The subscripts of every buffer reference of `statements`, those of `while`/`if`/`switch`
/// bodies included (a range inside a body is described with the step, so the params it
/// names must be bound there too).
fn subscripts_into<'a>(
    scope: &Scope<'a>,
    statements: &'a [ast::Statement],
    tokens: &mut TokenStream,
) {
    for statement in statements {
        for reference in scope.statement_refs(statement) {
            for expr in reference.subscript_exprs() {
                expr.to_tokens(tokens);
            }
        }
        if let ast::Statement::Control(control) = statement {
            for body in control.bodies() {
                subscripts_into(scope, body, tokens);
            }
        }
    }
}

/// A name as the generated code spells it: `r#type` becomes `type`.
fn name(ident: &Ident) -> String {
    ident.unraw().to_string()
}

/// What the macro itself names `ty` for pipeline `pipeline`, if anything: the pipeline's own
/// struct or one of the types named after it (`expand::names::Names`).
pub fn generated_type(pipeline: &Ident, ty: &str) -> Option<String> {
    let pipeline = name(pipeline);
    let rest = ty.strip_prefix(&pipeline)?;
    match rest {
        "" => Some(format!("the pipeline `{pipeline}` itself")),
        "Params" | "Run" | "Graph" | "Window" => Some(format!(
            "the type the macro generates for the pipeline's {}",
            rest.to_lowercase()
        )),
        _ => None,
    }
}

/// `HeatStep` + `copy_in` → `HeatStepCopyIn`.
pub fn marker(pipeline: &Ident, stream: &Ident) -> String {
    let mut marker = name(pipeline);
    for part in name(stream).split('_').filter(|part| !part.is_empty()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            marker.extend(first.to_uppercase());
            marker.push_str(chars.as_str());
        }
    }
    marker
}

fn lower_kernel(module: usize, decl: &ast::Kernel) -> Result<Kernel<'_>, Unresolved> {
    let params = decl
        .params
        .iter()
        .map(|param| {
            let kind = match param.kind() {
                KernelParamType::Scalar(ty) => KernelParamKind::Scalar {
                    ty: type_string(ty),
                },
                KernelParamType::Slice {
                    mutable,
                    elem,
                    bound,
                    ..
                } => KernelParamKind::Slice {
                    elem: type_string(elem),
                    mode: if mutable { Mode::Write } else { Mode::Read },
                    bound: match bound {
                        Some(expr) => {
                            Some(bound::resolve(decl, expr).map_err(|_| unresolved(&param.name))?)
                        }
                        None => None,
                    },
                },
                KernelParamType::Condition => KernelParamKind::Condition,
                KernelParamType::Unsupported => return Err(unresolved(&param.name)),
            };
            Ok(KernelParam {
                name: name(&param.name),
                kind,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Kernel {
        decl,
        module: ModuleId(module),
        name: name(&decl.name),
        params,
        host: decl
            .host
            .as_ref()
            .map(|host| ast::tokens_string(&host.path)),
    })
}
