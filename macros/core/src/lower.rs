//! The stage graph: the checked pipeline with names resolved, accesses derived and the event
//! wiring computed, as plain data (ids, strings and enums, no syn types).
//!
//! Expressions (sizes, launch dimensions, fill values, closures) stay in the syntax tree:
//! stage ids equal the ast's stage order and each [`Statement`] keeps its index in its stage,
//! so phase 2 finds them there. The ordering itself is computed in [`graph`]; [`dot`] renders
//! the result.

mod dot;
mod graph;

use std::collections::BTreeMap;

use syn::Ident;
use syn::ext::IdentExt;

use crate::ast::{self, KernelParamType, Statement as AstStatement, bare_ident, type_string};
use crate::scope::{Scope, Value};

pub use graph::{Node, schedule};

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub usize);
    )*};
}

ids! {
    /// Index into [`Pipeline::streams`]. Stream 0 is the origin of every step.
    StreamId;
    /// Index into [`Pipeline::stages`], equal to the stage's place in program order.
    StageId;
    /// Index into [`Pipeline::buffers`].
    BufferId;
    /// Index into [`Pipeline::scalars`].
    ScalarId;
    /// Index into [`Pipeline::modules`].
    ModuleId;
    /// Index into [`Pipeline::kernels`].
    KernelId;
}

/// One pipeline, lowered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    /// The pipeline's name.
    pub name: String,
    /// Streams in declaration order; the first is the origin.
    pub streams: Vec<Stream>,
    /// Kernel modules.
    pub modules: Vec<Module>,
    /// Kernels over all modules.
    pub kernels: Vec<Kernel>,
    /// Scalar params.
    pub scalars: Vec<Scalar>,
    /// Buffer params and scratch buffers.
    pub buffers: Vec<Buffer>,
    /// Stages in program order.
    pub stages: Vec<Stage>,
    /// Every cross-stream ordering that data hazards and `after` require, before reduction.
    pub dependencies: Vec<Edge>,
    /// The waits to emit: the transitive reduction of [`Pipeline::dependencies`], given stream
    /// order. Each edge becomes one `cuStreamWaitEvent` on the target's stream.
    pub edges: Vec<Edge>,
    /// An order to enqueue stages in: topological, and program order wherever that is free.
    pub order: Vec<StageId>,
    /// Stages that record an event after their last statement: the sources of
    /// [`Pipeline::edges`] and the last stage of each stream in [`Pipeline::join`].
    pub events: Vec<StageId>,
    /// Streams whose first stage waits on the event the origin records at the start of a step.
    pub fork: Vec<StreamId>,
    /// Streams whose last stage the origin waits for at the end of a step.
    pub join: Vec<StreamId>,
}

/// The first declared stream: every step starts and ends on it.
pub const ORIGIN: StreamId = StreamId(0);

/// A declared stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    /// Its name (raw idents unprefixed).
    pub name: String,
    /// Its priority.
    pub priority: Priority,
    /// Whether it was declared `non_blocking` (no implicit sync with the legacy stream).
    pub non_blocking: bool,
    /// Name of the zero-sized marker type that types this stream: pipeline name plus the
    /// stream's name in camel case (`HeatStepCompute`).
    pub marker: String,
}

/// A stream priority. CUDA runs lower numbers first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// The greatest priority of the context's range.
    High,
    /// The least priority of the context's range.
    Low,
    /// The default priority.
    Default,
    /// A value, clamped to the context's range at run time.
    Value(i32),
}

/// A kernel module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Its name.
    pub name: String,
    /// How its image is loaded.
    pub format: ImageFormat,
}

/// The format of an embedded kernel image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// PTX text, JIT-compiled by the driver.
    Ptx,
    /// A cubin for one architecture.
    Cubin,
    /// A fat binary.
    Fatbin,
    /// CUDA C source, compiled at run time with NVRTC.
    CudaC,
}

/// A kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// Its module.
    pub module: ModuleId,
    /// Its entry point name.
    pub name: String,
    /// Its parameters.
    pub params: Vec<KernelParam>,
    /// The path of its host implementation, if declared.
    pub host: Option<String>,
}

/// A kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelParam {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: KernelParamKind,
}

/// What a kernel takes in one parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelParamKind {
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
    },
}

/// A scalar param.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scalar {
    /// Its name.
    pub name: String,
    /// Its type as written.
    pub ty: String,
}

/// A buffer param or scratch buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffer {
    /// Its name.
    pub name: String,
    /// Which memory it is.
    pub memory: Memory,
    /// Whether the pipeline may write it.
    pub mutable: bool,
    /// The element type as written, when there is one.
    pub elem: Option<String>,
    /// Whether the pipeline owns it (`scratch`) rather than borrowing it (`params`).
    pub scratch: bool,
}

/// Kinds of memory a name can refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// `DeviceBuffer<T>`.
    Device,
    /// `PinnedBuffer<T>`: page-locked host memory.
    Pinned,
    /// `FlagCell`: a device word for wait/write value.
    Flag,
    /// `Vec<T>` or `[T]`: pageable host memory.
    Pageable,
    /// A reference to any other type, such as a library handle; only `call` and `host`
    /// statements may name it.
    Opaque,
}

/// A stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Its name.
    pub name: String,
    /// The stream it runs on.
    pub stream: StreamId,
    /// Its statements in order.
    pub statements: Vec<Statement>,
    /// The buffers it touches, each once; a write covers a read.
    pub accesses: Vec<Access>,
    /// The stages named in its `after` clause.
    pub after: Vec<StageId>,
}

/// A statement with its place in the ast stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Index into the ast stage's statements, for the expressions kept there.
    pub index: usize,
    /// What it does.
    pub kind: StatementKind,
}

/// What a statement does, with names resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatementKind {
    /// A kernel launch.
    Launch {
        /// The kernel.
        kernel: KernelId,
        /// One argument per kernel parameter.
        args: Vec<Arg>,
    },
    /// An asynchronous copy.
    Copy {
        /// Read.
        src: BufferId,
        /// Written.
        dst: BufferId,
    },
    /// A memset.
    Fill {
        /// Written.
        dst: BufferId,
    },
    /// A stream wait on a flag value.
    Wait {
        /// Read.
        flag: BufferId,
        /// The comparison.
        condition: WaitCondition,
    },
    /// A stream write of a flag value.
    Write {
        /// Written.
        flag: BufferId,
    },
    /// A host closure enqueued in stream order.
    Host {
        /// Declared reads.
        reads: Vec<BufferId>,
        /// Declared writes.
        writes: Vec<BufferId>,
    },
    /// A Rust function given the stage's stream.
    Call {
        /// Declared reads.
        reads: Vec<BufferId>,
        /// Declared writes.
        writes: Vec<BufferId>,
    },
}

/// The comparison of a `wait` statement (`cuStreamWaitValue*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitCondition {
    /// `wait flag == v`.
    Equal,
    /// `wait flag >= v` (wrapping comparison, as in CUDA).
    AtLeast,
    /// `wait flag & v`: until any bit of `v` is set.
    AnyBit,
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

/// How a stage uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// Read only.
    Read,
    /// Written (and maybe read).
    Write,
}

/// One buffer access of a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The buffer.
    pub buffer: BufferId,
    /// How.
    pub mode: Mode,
}

/// A cross-stream ordering: `to` waits for `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The earlier stage; it records the event.
    pub from: StageId,
    /// The later stage; its stream waits on the event.
    pub to: StageId,
    /// Why, in buffer order, `after` last.
    pub reasons: Vec<Reason>,
}

/// Why one stage must wait for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Both touch `buffer` and at least one writes it.
    Hazard {
        /// The buffer.
        buffer: BufferId,
        /// Which order of accesses.
        hazard: Hazard,
    },
    /// The later stage is declared `after` the earlier one.
    After,
}

/// The data hazard between an earlier and a later access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hazard {
    /// The later stage reads what the earlier one writes.
    ReadAfterWrite,
    /// The later stage writes what the earlier one reads.
    WriteAfterRead,
    /// Both write.
    WriteAfterWrite,
}

impl Hazard {
    /// The short name CUDA programmers use: `RAW`, `WAR`, `WAW`.
    pub fn abbreviation(self) -> &'static str {
        match self {
            Hazard::ReadAfterWrite => "RAW",
            Hazard::WriteAfterRead => "WAR",
            Hazard::WriteAfterWrite => "WAW",
        }
    }
}

/// One step of a path through the ordering, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// The earlier stage.
    pub from: StageId,
    /// The later stage.
    pub to: StageId,
    /// What orders them.
    pub via: Via,
}

/// What orders the two stages of a [`Hop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// They run one after the other on one stream.
    Stream(StreamId),
    /// A dependency.
    Dependency(Reason),
}

/// An `after` that would close a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The stage with the `after` clause.
    pub stage: StageId,
    /// Index of the offending name in that stage's `after` list.
    pub after: usize,
    /// How the named stage already runs after `stage`, from `stage` to the named one.
    pub path: Vec<Hop>,
}

/// Why lowering failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `after` clauses that contradict the other orderings.
    Cycles(Vec<Cycle>),
    /// A name `check` should have rejected; a bug in this crate, reported rather than panicked.
    Unresolved(String),
}

impl Pipeline {
    /// A shortest path of orderings from `from` to `to`, if `to` runs after `from`.
    pub fn path(&self, from: StageId, to: StageId) -> Option<Vec<Hop>> {
        let streams: Vec<StreamId> = self.stages.iter().map(|stage| stage.stream).collect();
        graph::path(&streams, &self.dependencies, from, to)
    }

    /// The stage graph in Graphviz DOT: one cluster per stream, stream order dotted, one
    /// labelled edge per emitted wait, plus the fork and join edges of the step.
    pub fn dot(&self) -> String {
        dot::render(self)
    }
}

/// Lowers a checked pipeline. Fails on `after` cycles, which need the whole graph to find.
pub fn lower(scope: &Scope<'_>) -> Result<Pipeline, Error> {
    let input = scope.input;
    let streams = scope
        .streams
        .iter()
        .map(|stream| Stream {
            name: name(&stream.name),
            priority: stream
                .priority
                .as_ref()
                .map_or(Priority::Default, |option| option.level),
            non_blocking: stream.non_blocking.is_some(),
            marker: marker(&input.name, &stream.name),
        })
        .collect();
    let modules = scope
        .modules
        .iter()
        .map(|module| Module {
            name: name(&module.name),
            format: module.format,
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
        .map(|param| Scalar {
            name: name(&param.name),
            ty: type_string(&param.ty),
        })
        .collect();
    let buffers = scope
        .buffers
        .iter()
        .map(|buffer| Buffer {
            name: name(buffer.name),
            memory: buffer.memory,
            mutable: buffer.mutable,
            elem: buffer.elem.map(type_string),
            scratch: buffer.scratch,
        })
        .collect();
    let stages: Vec<Stage> = scope
        .stages
        .iter()
        .map(|stage| lower_stage(scope, stage))
        .collect::<Result<_, _>>()?;

    let nodes: Vec<Node> = stages
        .iter()
        .map(|stage| Node {
            stream: stage.stream,
            accesses: stage.accesses.clone(),
            after: stage.after.clone(),
        })
        .collect();
    let schedule = schedule(scope.streams.len(), &nodes).map_err(Error::Cycles)?;
    Ok(Pipeline {
        name: name(&input.name),
        streams,
        modules,
        kernels,
        scalars,
        buffers,
        stages,
        dependencies: schedule.dependencies,
        edges: schedule.edges,
        order: schedule.order,
        events: schedule.events,
        fork: schedule.fork,
        join: schedule.join,
    })
}

/// A name as the generated code spells it: `r#type` becomes `type`.
fn name(ident: &Ident) -> String {
    ident.unraw().to_string()
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

fn lower_kernel(module: usize, kernel: &ast::Kernel) -> Result<Kernel, Error> {
    let params = kernel
        .params
        .iter()
        .map(|param| {
            let kind = match param.kind() {
                KernelParamType::Scalar(ty) => KernelParamKind::Scalar {
                    ty: type_string(ty),
                },
                KernelParamType::Slice { mutable, elem } => KernelParamKind::Slice {
                    elem: type_string(elem),
                    mode: if mutable { Mode::Write } else { Mode::Read },
                },
                KernelParamType::Unsupported => {
                    return Err(Error::Unresolved(format!("type of `{}`", param.name)));
                }
            };
            Ok(KernelParam {
                name: name(&param.name),
                kind,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Kernel {
        module: ModuleId(module),
        name: name(&kernel.name),
        params,
        host: kernel
            .host
            .as_ref()
            .map(|host| ast::tokens_string(&host.path)),
    })
}

fn lower_stage(scope: &Scope<'_>, stage: &ast::Stage) -> Result<Stage, Error> {
    let stream = scope
        .stream(&stage.stream)
        .ok_or_else(|| unresolved(&stage.stream))?;
    let after = stage
        .after
        .iter()
        .map(|name| {
            scope
                .stage(name)
                .map(StageId)
                .ok_or_else(|| unresolved(name))
        })
        .collect::<Result<_, _>>()?;
    let statements: Vec<Statement> = stage
        .statements
        .iter()
        .enumerate()
        .map(|(index, statement)| {
            Ok(Statement {
                index,
                kind: lower_statement(scope, statement)?,
            })
        })
        .collect::<Result<_, Error>>()?;
    Ok(Stage {
        name: name(&stage.name),
        stream: StreamId(stream),
        accesses: accesses(&statements),
        statements,
        after,
    })
}

fn unresolved(ident: &Ident) -> Error {
    Error::Unresolved(ident.to_string())
}

fn buffer(scope: &Scope<'_>, ident: &Ident) -> Result<BufferId, Error> {
    scope
        .buffer(ident)
        .map(BufferId)
        .ok_or_else(|| unresolved(ident))
}

fn buffers<'a>(
    scope: &Scope<'_>,
    idents: impl Iterator<Item = &'a Ident>,
) -> Result<Vec<BufferId>, Error> {
    idents.map(|ident| buffer(scope, ident)).collect()
}

fn lower_statement(scope: &Scope<'_>, statement: &AstStatement) -> Result<StatementKind, Error> {
    Ok(match statement {
        AstStatement::Launch(launch) => {
            let (module, kernel) = launch
                .target()
                .ok_or_else(|| Error::Unresolved(ast::tokens_string(&launch.path)))?;
            let module = scope.module(module).ok_or_else(|| unresolved(module))?;
            let kernel_id = scope
                .kernel(module, kernel)
                .ok_or_else(|| unresolved(kernel))?;
            let decl = scope.kernels[kernel_id].decl;
            let args = decl
                .params
                .iter()
                .zip(&launch.args)
                .map(|(param, arg)| lower_arg(scope, param, arg))
                .collect::<Result<_, _>>()?;
            StatementKind::Launch {
                kernel: KernelId(kernel_id),
                args,
            }
        }
        AstStatement::Copy(copy) => StatementKind::Copy {
            src: buffer(scope, &copy.src)?,
            dst: buffer(scope, &copy.dst)?,
        },
        AstStatement::Fill(fill) => StatementKind::Fill {
            dst: buffer(scope, &fill.dst)?,
        },
        AstStatement::Wait(wait) => StatementKind::Wait {
            flag: buffer(scope, &wait.flag)?,
            condition: wait.condition,
        },
        AstStatement::Write(write) => StatementKind::Write {
            flag: buffer(scope, &write.flag)?,
        },
        AstStatement::Host(host) => StatementKind::Host {
            reads: buffers(scope, host.accesses.reads())?,
            writes: buffers(scope, host.accesses.writes())?,
        },
        AstStatement::Call(call) => StatementKind::Call {
            reads: buffers(scope, call.accesses.reads())?,
            writes: buffers(scope, call.accesses.writes())?,
        },
        AstStatement::NotCapturable(statement) => return Err(unresolved(&statement.word)),
    })
}

fn lower_arg(scope: &Scope<'_>, param: &ast::KernelParam, arg: &syn::Expr) -> Result<Arg, Error> {
    match param.kind() {
        KernelParamType::Slice { mutable, .. } => {
            let ident = bare_ident(arg).ok_or_else(|| unresolved(&param.name))?;
            let mode = if mutable { Mode::Write } else { Mode::Read };
            Ok(Arg::Buffer {
                buffer: buffer(scope, ident)?,
                mode,
            })
        }
        KernelParamType::Scalar(ty) => {
            let ty = type_string(ty);
            let param = match bare_ident(arg).and_then(|ident| scope.value(ident)) {
                Some(Value::Scalar(id)) => Some(id),
                Some(Value::Buffer(_)) => return Err(unresolved(&param.name)),
                None => None,
            };
            let assert_type = param.is_none_or(|id| type_string(&scope.scalars[id].ty) != ty);
            Ok(Arg::Scalar {
                ty,
                param: param.map(ScalarId),
                assert_type,
            })
        }
        KernelParamType::Unsupported => Err(unresolved(&param.name)),
    }
}

/// The buffers a stage touches, in first-use order, each once; a write covers a read.
fn accesses(statements: &[Statement]) -> Vec<Access> {
    let mut order = Vec::new();
    let mut modes = BTreeMap::new();
    let mut touch = |buffer: BufferId, mode: Mode| {
        let entry = modes.entry(buffer).or_insert_with(|| {
            order.push(buffer);
            mode
        });
        *entry = (*entry).max(mode);
    };
    for statement in statements {
        match &statement.kind {
            StatementKind::Launch { args, .. } => {
                for arg in args {
                    if let Arg::Buffer { buffer, mode } = arg {
                        touch(*buffer, *mode);
                    }
                }
            }
            StatementKind::Copy { src, dst } => {
                touch(*src, Mode::Read);
                touch(*dst, Mode::Write);
            }
            StatementKind::Fill { dst } => touch(*dst, Mode::Write),
            StatementKind::Wait { flag, .. } => touch(*flag, Mode::Read),
            StatementKind::Write { flag } => touch(*flag, Mode::Write),
            StatementKind::Host { reads, writes } | StatementKind::Call { reads, writes } => {
                reads.iter().for_each(|buffer| touch(*buffer, Mode::Read));
                writes.iter().for_each(|buffer| touch(*buffer, Mode::Write));
            }
        }
    }
    order
        .into_iter()
        .filter_map(|buffer| {
            Some(Access {
                buffer,
                mode: *modes.get(&buffer)?,
            })
        })
        .collect()
}
