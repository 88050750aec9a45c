//! The syntax tree of one `gpu_pipeline!` input.
//!
//! The `Parse` impls accept the grammar documented at the crate root and keep the user's own
//! idents, types and expressions, so that every later error can point at them. Parsing checks
//! shape only: names, types and memory kinds are judged in `check`, which reports all of its
//! findings together. The exception is a repeated option (`priority` twice, `grid` twice),
//! which is a syntax error at the second occurrence, as in pin-project's option loops.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{
    Attribute, Expr, ExprCall, ExprClosure, Ident, LitInt, Path, Token, Type, Visibility, braced,
    bracketed, parenthesized, token,
};

use crate::symbol::{NOT_CAPTURABLE, kw};

mod buffer;
mod collective;
mod control;
mod device;
mod mentions;
mod parse;
mod tokens;

use buffer::parse_buffer_ref;
pub use buffer::{BoundsRef, BufRef, BufferRef};
pub use collective::{Comm, CommOp, Operand};
pub use control::{Case, Comparison, Condition, Control, StepCondition, flatten};
pub use device::{Device, DeviceIndex, Devices, OnDevice};
pub use mentions::{Mention, Use, mentions, token_mentions};
pub use tokens::{bare_ident, tokens_string, type_string, ungroup_expr, ungroup_type};

/// A whole `gpu_pipeline!` input: one pipeline declaration.
#[derive(Debug)]
pub struct Pipeline {
    /// Outer attributes, doc comments included; phase 2 puts them on the generated struct.
    pub attrs: Vec<Attribute>,
    /// Visibility of the generated items.
    pub vis: Visibility,
    /// The `pipeline` keyword.
    pub pipeline_token: kw::pipeline,
    /// The pipeline's name, which names the generated struct.
    pub name: Ident,
    /// The items of the body, in source order.
    pub items: Vec<Item>,
}

/// One item of a pipeline body.
#[derive(Debug)]
pub enum Item {
    /// `streams { ... }`.
    Streams(Streams),
    /// `kernels NAME = FORMAT(IMAGE) { ... }`: one module of kernels.
    Kernels(Module),
    /// `params { ... }`.
    Params(Params),
    /// `scratch { ... }`.
    Scratch(ScratchBlock),
    /// `stage NAME on STREAM [after ...] { ... }`.
    Stage(Stage),
    /// `concurrent(a, b, ...);`.
    Concurrent(Concurrent),
    /// `devices { ... }`.
    Devices(Devices),
    /// `for i in START..END { ... }`: its stages once per `i`.
    For(ForLoop),
    /// `step NAME { ... }`: one kind of step.
    Step(StepBlock),
    /// `swap(a, b);`: two buffer params a captured graph can exchange between replays.
    Swap(Swap),
}

/// `for i in 0..n { let lo = i * c; stage ... }`.
#[derive(Debug)]
pub struct ForLoop {
    /// The `for` keyword.
    pub keyword: Token![for],
    /// The loop variable, a `usize` in the body.
    pub var: Ident,
    /// The first value.
    pub start: Expr,
    /// One past the last value.
    pub end: Expr,
    /// `let NAME = EXPR;` bindings, computed per iteration before its stages.
    pub lets: Vec<Let>,
    /// The stages and `concurrent` claims of one iteration.
    pub items: Vec<Item>,
}

/// `let NAME = EXPR;` at the start of a `for` body.
#[derive(Debug)]
pub struct Let {
    /// The `let` keyword.
    pub keyword: Token![let],
    /// The name bound.
    pub name: Ident,
    /// Its value, over the params, the loop variable and earlier `let`s.
    pub value: Expr,
}

/// `step finish { stage ... }`: a kind of step of the pipeline.
#[derive(Debug)]
pub struct StepBlock {
    /// Doc comments.
    pub attrs: Vec<Attribute>,
    /// The `step` keyword.
    pub keyword: kw::step,
    /// The step's name, which names its methods (`run_finish`, `launch_finish`, ...).
    pub name: Ident,
    /// Its stages, loops and claims.
    pub items: Vec<Item>,
}

/// The error for `swap(xs[0], xs[1])`: an exchange renames two whole params.
const SWAP_ELEMENT: &str = "`swap` exchanges two whole buffer params by name, not elements of a \
                            buffer array: declare the two as params of their own, or alternate \
                            by hand (`launch k::sweep(xs[0], xs[1])`, then \
                            `launch k::sweep(xs[1], xs[0])`)";

/// `swap(a, b);`.
#[derive(Debug)]
pub struct Swap {
    /// The `swap` keyword.
    pub keyword: kw::swap,
    /// The first buffer param.
    pub a: Ident,
    /// The second.
    pub b: Ident,
}

impl Parse for Swap {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let keyword = input.parse()?;
        let content;
        parenthesized!(content in input);
        let a = content.parse()?;
        if content.peek(token::Bracket) {
            return Err(content.error(SWAP_ELEMENT));
        }
        content.parse::<Token![,]>()?;
        let b = content.parse()?;
        if content.peek(token::Bracket) {
            return Err(content.error(SWAP_ELEMENT));
        }
        if content.peek(Token![,]) {
            content.parse::<Token![,]>()?;
        }
        if !content.is_empty() {
            return Err(content.error("`swap` exchanges two buffers: `swap(a, b);`"));
        }
        input.parse::<Token![;]>()?;
        Ok(Swap { keyword, a, b })
    }
}

/// `streams { compute(priority = high), copy(non_blocking) }`.
#[derive(Debug)]
pub struct Streams {
    /// Attributes before the block (only doc comments are accepted).
    pub attrs: Vec<Attribute>,
    /// The `streams` keyword.
    pub keyword: kw::streams,
    /// The declared streams in order; the first is the origin of every step.
    pub streams: Vec<Stream>,
}

/// One declared stream with its options.
#[derive(Debug)]
pub struct Stream {
    /// Doc comments.
    pub attrs: Vec<Attribute>,
    /// The stream's name.
    pub name: Ident,
    /// `priority = ...`, if given.
    pub priority: Option<PriorityOption>,
    /// `non_blocking`, if given.
    pub non_blocking: Option<kw::non_blocking>,
    /// `on DEVICE`, if given.
    pub device: Option<OnDevice>,
    /// `name[COUNT]`: an array of `COUNT` streams (an expression over the params).
    pub count: Option<Expr>,
}

/// `priority = high | low | default | INTEGER`, with the span of the value.
#[derive(Debug)]
pub struct PriorityOption {
    /// The requested priority.
    pub level: Priority,
    /// The value's tokens, for diagnostics.
    pub span: Span,
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

/// `kernels heat = ptx(include_str!("heat.ptx")) { fn ...; }`.
#[derive(Debug)]
pub struct Module {
    /// `unsafe`: the user vouches that the signatures below match the image's kernels, as
    /// `unsafe extern` does for foreign functions.
    pub unsafe_token: Option<Token![unsafe]>,
    /// Doc comments.
    pub attrs: Vec<Attribute>,
    /// The `kernels` keyword.
    pub keyword: kw::kernels,
    /// The module's name, used as `name::kernel` in `launch`.
    pub name: Ident,
    /// Which loader the image needs.
    pub format: ImageFormat,
    /// The format keyword's span.
    pub format_span: Span,
    /// The image expression (`include_str!`, `include_bytes!`, a `const`...).
    pub image: Expr,
    /// The kernels the module exports.
    pub kernels: Vec<Kernel>,
}

/// `fn stencil(nx: u32, src: &[f32; nx], dst: &mut [f32; nx]) cpu = path;`.
#[derive(Debug)]
pub struct Kernel {
    /// Doc comments.
    pub attrs: Vec<Attribute>,
    /// The `fn` keyword.
    pub fn_token: Token![fn],
    /// The kernel's entry point name.
    pub name: Ident,
    /// Its parameters as declared.
    pub params: Vec<KernelParam>,
    /// `cpu = PATH`: the CPU implementation the CPU backend runs.
    pub host: Option<HostImpl>,
}

/// `cpu = crate::heat_cpu::stencil` on a kernel (`host = ...`, the spelling of earlier
/// versions, is accepted too).
#[derive(Debug)]
pub struct HostImpl {
    /// The keyword's span (`cpu`, or `host`).
    pub keyword: Span,
    /// The path of the Rust function.
    pub path: Path,
}

/// `name: Type` in a kernel signature.
#[derive(Debug)]
pub struct KernelParam {
    /// The parameter's name, used in messages.
    pub name: Ident,
    /// Its type: a scalar, `&[T; BOUND]` (read) or `&mut [T; BOUND]` (written) for a buffer
    /// the kernel indexes only below `BOUND`, or `&[T; unbounded]` and `&mut [T; unbounded]`
    /// for one whose indices the kernel checks itself (`&[T]` and `&mut [T]` mean the same,
    /// but are refused next to an integer parameter: see `check/bounds.rs`).
    pub ty: Type,
}

/// What a kernel parameter's type means to the macro.
#[derive(Debug, Clone, Copy)]
pub enum KernelParamType<'a> {
    /// Passed by value.
    Scalar(&'a Type),
    /// `&[T]` (`mutable == false`) or `&mut [T]`, with `; BOUND` inside the brackets when
    /// declared, or `; unbounded` when the kernel checks its own indices.
    Slice {
        /// Whether the kernel writes through it.
        mutable: bool,
        /// The element type `T`.
        elem: &'a Type,
        /// The bound below which the kernel indexes it: the `n` of `&mut [f32; n]`.
        bound: Option<&'a Expr>,
        /// Whether it is declared `&mut [T; unbounded]`: no bound, on purpose.
        unbounded: bool,
    },
    /// `Condition`: the kernel sets a device `while`, `do ... while`, `if` or `switch`
    /// condition itself (`gp_set_condition`); the argument is a `Condition` scratch entry.
    Condition,
    /// A reference to something other than a slice, a bare slice, or a raw pointer.
    Unsupported,
}

impl KernelParam {
    /// Classifies this parameter's type.
    pub fn kind(&self) -> KernelParamType<'_> {
        match ungroup_type(&self.ty) {
            Type::Reference(reference) => match ungroup_type(&reference.elem) {
                Type::Slice(slice) => KernelParamType::Slice {
                    mutable: reference.mutability.is_some(),
                    elem: ungroup_type(&slice.elem),
                    bound: None,
                    unbounded: false,
                },
                // `; unbounded`: a buffer of any length, whose indices the kernel checks.
                Type::Array(array)
                    if bare_ident(&array.len)
                        .is_some_and(|len| len == crate::symbol::UNBOUNDED) =>
                {
                    KernelParamType::Slice {
                        mutable: reference.mutability.is_some(),
                        elem: ungroup_type(&array.elem),
                        bound: None,
                        unbounded: true,
                    }
                }
                // Not an array reference: a buffer of any length, indexed below the bound.
                Type::Array(array) => KernelParamType::Slice {
                    mutable: reference.mutability.is_some(),
                    elem: ungroup_type(&array.elem),
                    bound: Some(&array.len),
                    unbounded: false,
                },
                _ => KernelParamType::Unsupported,
            },
            Type::Slice(_) | Type::Ptr(_) => KernelParamType::Unsupported,
            Type::Path(path)
                if path.qself.is_none()
                    && path.path.segments.len() == 1
                    && path.path.segments[0].ident == crate::symbol::CONDITION
                    && path.path.segments[0].arguments.is_none() =>
            {
                KernelParamType::Condition
            }
            ty => KernelParamType::Scalar(ty),
        }
    }
}

impl Kernel {
    /// The signature as the user wrote it, for messages: `fn stencil(nx: u32, src: &[f32])`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|param| format!("{}: {}", param.name, type_string(&param.ty)))
            .collect();
        format!("fn {}({})", self.name, params.join(", "))
    }
}

/// `params { nx: u32, field: &mut DeviceBuffer<f32> }`.
#[derive(Debug)]
pub struct Params {
    /// Attributes before the block.
    pub attrs: Vec<Attribute>,
    /// The `params` keyword.
    pub keyword: kw::params,
    /// The params in order.
    pub params: Vec<Param>,
}

/// One `name: Type` param.
#[derive(Debug)]
pub struct Param {
    /// Doc comments.
    pub attrs: Vec<Attribute>,
    /// The param's name.
    pub name: Ident,
    /// Its declared type.
    pub ty: Type,
    /// `on DEVICE`, if given.
    pub device: Option<OnDevice>,
}

/// `scratch { tmp: DeviceBuffer<f32> = LEN }`.
#[derive(Debug)]
pub struct ScratchBlock {
    /// Attributes before the block.
    pub attrs: Vec<Attribute>,
    /// The `scratch` keyword.
    pub keyword: kw::scratch,
    /// The scratch buffers in order.
    pub buffers: Vec<Scratch>,
}

/// One pipeline-owned buffer: `name: Type [= LEN]`.
#[derive(Debug)]
pub struct Scratch {
    /// Doc comments.
    pub attrs: Vec<Attribute>,
    /// The buffer's name.
    pub name: Ident,
    /// Its type: `DeviceBuffer<T>`, `PinnedBuffer<T>` or `FlagCell`.
    pub ty: Type,
    /// `on DEVICE`, if given.
    pub device: Option<OnDevice>,
    /// The length expression, evaluated over the params when the pipeline is built.
    pub len: Option<Expr>,
}

/// `stage step on compute after a, b { ... }`.
#[derive(Debug)]
pub struct Stage {
    /// Doc comments.
    pub attrs: Vec<Attribute>,
    /// The `stage` keyword.
    pub keyword: kw::stage,
    /// The stage's name.
    pub name: Ident,
    /// The stream it runs on.
    pub stream: Ident,
    /// `on name[EXPR]`: the element of a stream array.
    pub lane: Option<Expr>,
    /// Stages it must run after although no data access says so.
    pub after: Vec<Ident>,
    /// The statements, run in order on the stage's stream.
    pub statements: Vec<Statement>,
}

/// One statement of a stage. Each ends with `;`.
#[derive(Debug)]
pub enum Statement {
    /// `launch module::kernel(args) grid G block B [shared S];`.
    Launch(Box<Launch>),
    /// `copy src -> dst;`.
    Copy(Box<Copy>),
    /// `fill dst = VALUE;`.
    Fill(Box<Fill>),
    /// `wait flag == VALUE;` (also `>=`, `&`).
    Wait(Wait),
    /// `write flag = VALUE;`.
    Write(Write),
    /// `host CLOSURE reads(...) writes(...);`.
    Host(Host),
    /// `call path(args) reads(...) writes(...);`.
    Call(Call),
    /// `while COND max N { ... }` or `if COND { ... }`: device-side control flow
    /// (`ast/control.rs`).
    Control(Box<Control>),
    /// `send`, `recv`, `all_reduce`, `broadcast`, `all_gather` or `reduce_scatter`.
    Comm(Box<Comm>),
    /// A statement that cannot be part of a captured step, kept to reject it by name.
    NotCapturable(NotCapturable),
}

/// `launch heat::stencil(nx, ny, field, next) grid G block B shared S;`.
#[derive(Debug)]
pub struct Launch {
    /// The `launch` keyword.
    pub keyword: kw::launch,
    /// `module::kernel`.
    pub path: Path,
    /// The argument list's parentheses.
    pub paren: token::Paren,
    /// The arguments: buffer names for slice params, expressions for scalars.
    pub args: Punctuated<Expr, Token![,]>,
    /// Per argument, `on rank EXPR` after it: a neighbour's part of a window.
    pub ranks: Vec<Option<OnRank>>,
    /// `grid EXPR`: blocks per grid, `x`, `(x, y)` or `(x, y, z)`.
    pub grid: Option<LaunchOption>,
    /// `block EXPR`: threads per block, same forms.
    pub block: Option<LaunchOption>,
    /// `shared EXPR`: dynamic shared memory in bytes.
    pub shared: Option<LaunchOption>,
    /// `peer(NAME,*)`: buffer arguments that may live on another device than the launch's
    /// (peer access).
    pub peer: Option<PeerClause>,
}

/// `on rank EXPR` after a window argument of a launch (`halos[0..n] on rank up`): the part
/// of rank `EXPR`'s window the kernel writes, mapped here.
#[derive(Debug)]
pub struct OnRank {
    /// The `on` keyword.
    pub on: kw::on,
    /// The `rank` keyword.
    pub rank: kw::rank,
    /// The rank, a `usize` expression over the params.
    pub expr: Expr,
}

/// `peer(halo, edge)` after a launch: the buffers it names may be on another device, which
/// the kernel then reaches through peer access.
#[derive(Debug)]
pub struct PeerClause {
    /// The `peer` keyword's span.
    pub span: Span,
    /// The buffers named.
    pub names: Punctuated<Ident, Token![,]>,
}

impl PeerClause {
    /// Whether the clause names `name`.
    pub fn names(&self, name: &Ident) -> bool {
        self.names.iter().any(|n| n == name)
    }
}

/// One `grid`/`block`/`shared` clause.
#[derive(Debug)]
pub struct LaunchOption {
    /// The keyword's span.
    pub span: Span,
    /// The value.
    pub value: Expr,
}

impl Launch {
    /// The module and kernel idents, when the path has the `module::kernel` shape.
    pub fn target(&self) -> Option<(&Ident, &Ident)> {
        let mut segments = self.path.segments.iter();
        match (
            self.path.leading_colon,
            segments.next(),
            segments.next(),
            segments.next(),
        ) {
            (None, Some(module), Some(kernel), None)
                if module.arguments.is_none() && kernel.arguments.is_none() =>
            {
                Some((&module.ident, &kernel.ident))
            }
            _ => None,
        }
    }
}

/// `copy src -> dst;`.
#[derive(Debug)]
pub struct Copy {
    /// The `copy` keyword.
    pub keyword: kw::copy,
    /// The buffer read.
    pub src: Ident,
    /// The buffer read, with its subscripts.
    pub src_ref: BufferRef,
    /// The buffer written.
    pub dst: Ident,
    /// The buffer written, with its subscripts.
    pub dst_ref: BufferRef,
}

/// `fill dst = VALUE;`.
#[derive(Debug)]
pub struct Fill {
    /// The `fill` keyword.
    pub keyword: kw::fill,
    /// The buffer written.
    pub dst: Ident,
    /// The buffer written, with its subscripts.
    pub dst_ref: BufferRef,
    /// The element value.
    pub value: Expr,
}

/// `wait flag == VALUE;`: the stream waits until the flag cell satisfies the condition.
#[derive(Debug)]
pub struct Wait {
    /// The `wait` keyword.
    pub keyword: kw::wait,
    /// The flag cell.
    pub flag: Ident,
    /// `==`, `>=` or `&`.
    pub condition: WaitCondition,
    /// The value compared with.
    pub value: Expr,
}

/// `write flag = VALUE;`: the stream stores a value into the flag cell.
#[derive(Debug)]
pub struct Write {
    /// The `write` keyword.
    pub keyword: kw::write,
    /// The flag cell.
    pub flag: Ident,
    /// The value stored.
    pub value: Expr,
}

/// `host |snapshot| { ... } reads(snapshot);`: a closure run on the host in stream order.
#[derive(Debug)]
pub struct Host {
    /// The `host` keyword.
    pub keyword: kw::host,
    /// The closure.
    pub closure: ExprClosure,
    /// Its declared accesses.
    pub accesses: Accesses,
}

/// `call crate::blas::gemv(a, x, y) reads(a, x) writes(y);`.
#[derive(Debug)]
pub struct Call {
    /// The `call` keyword.
    pub keyword: kw::call,
    /// The function call, without the stream argument the generated code adds.
    pub call: ExprCall,
    /// Its declared accesses.
    pub accesses: Accesses,
}

/// The name of the function a `call` statement calls, for messages: `gemv` for
/// `call blas::gemv(...)`, "the function" when it is not a path.
pub fn function_name(call: &ExprCall) -> String {
    match ungroup_expr(&call.func) {
        Expr::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
    .unwrap_or_else(|| "the function".to_owned())
}

/// `reads(a, b) writes(c)`: the accesses of a `host` or `call` statement.
#[derive(Debug, Default)]
pub struct Accesses {
    /// `reads(...)`.
    pub reads: Option<AccessList>,
    /// `writes(...)`.
    pub writes: Option<AccessList>,
}

/// The names in one `reads(...)` or `writes(...)` clause.
#[derive(Debug)]
pub struct AccessList {
    /// The keyword's span.
    pub span: Span,
    /// The buffers named.
    pub names: Punctuated<Ident, Token![,]>,
}

impl Accesses {
    /// The names read.
    pub fn reads(&self) -> impl Iterator<Item = &Ident> {
        self.reads.iter().flat_map(|list| list.names.iter())
    }

    /// The names written.
    pub fn writes(&self) -> impl Iterator<Item = &Ident> {
        self.writes.iter().flat_map(|list| list.names.iter())
    }
}

/// A recognised statement that has no place in a captured step (`synchronize;`, ...).
#[derive(Debug)]
pub struct NotCapturable {
    /// The statement's first word.
    pub word: Ident,
    /// The rest of the statement, up to the `;`.
    pub rest: TokenStream,
}

/// `concurrent(a, b);`: a claim that no ordering exists between any two of the stages.
#[derive(Debug)]
pub struct Concurrent {
    /// The `concurrent` keyword.
    pub keyword: kw::concurrent,
    /// The stages claimed concurrent.
    pub stages: Punctuated<Ident, Token![,]>,
}

/// Where a stage sits: in which kind of step, and in which loop.
#[derive(Debug, Clone, Copy)]
pub struct StagePlace<'a> {
    /// The stage.
    pub stage: &'a Stage,
    /// The `step` block it is in, if any.
    pub step: Option<&'a StepBlock>,
    /// The `for` loop it is in, if any.
    pub looped: Option<&'a ForLoop>,
    /// A `for` inside a `for` (rejected by the checks; the stage sits in the innermost).
    pub nested: bool,
}

/// Every stage in program order, with where it sits.
fn places<'a>(
    items: &'a [Item],
    step: Option<&'a StepBlock>,
    looped: Option<&'a ForLoop>,
    nested: bool,
    out: &mut Vec<StagePlace<'a>>,
) {
    for item in items {
        match item {
            Item::Stage(stage) => out.push(StagePlace {
                stage,
                step,
                looped,
                nested,
            }),
            Item::For(body) => places(&body.items, step, Some(body), looped.is_some(), out),
            Item::Step(block) => places(&block.items, Some(block), looped, nested, out),
            _ => {}
        }
    }
}

/// Every claim in the items, with its loop.
fn claims_in<'a>(
    items: &'a [Item],
    looped: Option<&'a ForLoop>,
    out: &mut Vec<(&'a Concurrent, Option<&'a ForLoop>)>,
) {
    for item in items {
        match item {
            Item::Concurrent(claim) => out.push((claim, looped)),
            Item::For(body) => claims_in(&body.items, Some(body), out),
            Item::Step(block) => claims_in(&block.items, looped, out),
            _ => {}
        }
    }
}

/// Every loop in the items, nested ones included, in program order.
fn loops_in<'a>(items: &'a [Item], out: &mut Vec<&'a ForLoop>) {
    for item in items {
        match item {
            Item::For(body) => {
                out.push(body);
                loops_in(&body.items, out);
            }
            Item::Step(block) => loops_in(&block.items, out),
            _ => {}
        }
    }
}

impl Pipeline {
    /// Every stage in program order, with the step and loop it sits in.
    pub fn stage_places(&self) -> Vec<StagePlace<'_>> {
        let mut out = Vec::new();
        places(&self.items, None, None, false, &mut out);
        out
    }

    /// Every `step` block.
    pub fn steps(&self) -> impl Iterator<Item = &StepBlock> {
        self.items.iter().filter_map(|item| match item {
            Item::Step(block) => Some(block),
            _ => None,
        })
    }

    /// Every `for` loop, nested ones included.
    pub fn loops(&self) -> Vec<&ForLoop> {
        let mut out = Vec::new();
        loops_in(&self.items, &mut out);
        out
    }

    /// Every `swap(a, b)`.
    pub fn swaps(&self) -> impl Iterator<Item = &Swap> {
        self.items.iter().filter_map(|item| match item {
            Item::Swap(swap) => Some(swap),
            _ => None,
        })
    }

    /// Every `concurrent(...)` claim, with the loop it sits in.
    pub fn claims_with_loops(&self) -> Vec<(&Concurrent, Option<&ForLoop>)> {
        let mut out = Vec::new();
        claims_in(&self.items, None, &mut out);
        out
    }

    /// Every declared stream, over all `streams` blocks.
    pub fn streams(&self) -> impl Iterator<Item = &Stream> {
        self.items.iter().flat_map(|item| match item {
            Item::Streams(block) => block.streams.as_slice(),
            _ => &[],
        })
    }

    /// Every kernel module.
    pub fn modules(&self) -> impl Iterator<Item = &Module> {
        self.items.iter().filter_map(|item| match item {
            Item::Kernels(module) => Some(module),
            _ => None,
        })
    }

    /// Every param, over all `params` blocks.
    pub fn params(&self) -> impl Iterator<Item = &Param> {
        self.items.iter().flat_map(|item| match item {
            Item::Params(block) => block.params.as_slice(),
            _ => &[],
        })
    }

    /// Every scratch buffer, over all `scratch` blocks.
    pub fn scratch(&self) -> impl Iterator<Item = &Scratch> {
        self.items.iter().flat_map(|item| match item {
            Item::Scratch(block) => block.buffers.as_slice(),
            _ => &[],
        })
    }

    /// Every stage in program order, those inside `step` blocks and `for` loops included.
    pub fn stages(&self) -> impl Iterator<Item = &Stage> {
        self.stage_places().into_iter().map(|place| place.stage)
    }

    /// Every declared device, over all `devices` blocks.
    pub fn devices(&self) -> impl Iterator<Item = &Device> {
        self.items.iter().flat_map(|item| match item {
            Item::Devices(block) => block.devices.as_slice(),
            _ => &[],
        })
    }

    /// Every `concurrent(...)` claim, those inside `step` blocks and `for` loops included.
    pub fn claims(&self) -> impl Iterator<Item = &Concurrent> {
        self.claims_with_loops().into_iter().map(|(claim, _)| claim)
    }
}
