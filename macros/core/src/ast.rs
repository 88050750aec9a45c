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

mod collective;
mod control;
mod device;
mod mentions;

pub use collective::{Comm, CommOp, Operand};
pub use control::{Case, Comparison, Condition, Control, StepCondition, flatten};
pub use device::{Device, DeviceIndex, Devices, OnDevice};
pub use mentions::{Mention, Use, mentions, token_mentions};

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
        content.parse::<Token![,]>()?;
        let b = content.parse()?;
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

/// A buffer as a statement names it: `x`, `xs[k]` (an element of a buffer array), `x[lo..hi]`
/// (a range of elements) or `xs[k][lo..hi]`.
#[derive(Debug, Clone)]
pub struct BufferRef {
    /// The buffer's name.
    pub name: Ident,
    /// `[k]`: the element of a buffer array.
    pub index: Option<Expr>,
    /// `[lo..hi]`: the range of elements.
    pub range: Option<Bounds>,
}

/// The bounds of `x[lo..hi]`; either may be left out (`x[..hi]`, `x[lo..]`, `x[..]`).
#[derive(Debug, Clone)]
pub struct Bounds {
    /// The first element, 0 when left out.
    pub start: Option<Expr>,
    /// One past the last element, the length when left out.
    pub end: Option<Expr>,
    /// The brackets' span, for messages.
    pub span: Span,
}

impl BufferRef {
    /// A bare name.
    pub fn bare(name: Ident) -> BufferRef {
        BufferRef {
            name,
            index: None,
            range: None,
        }
    }

    /// The reference, borrowed.
    pub fn borrow(&self) -> BufRef<'_> {
        BufRef {
            name: &self.name,
            index: self.index.as_ref(),
            range: self.range.as_ref().map(|b| BoundsRef {
                start: b.start.as_ref(),
                end: b.end.as_ref(),
                span: b.span,
            }),
        }
    }
}

/// A buffer reference borrowed from the syntax tree: a `copy`'s or `fill`'s buffer, or a
/// `launch` argument for a slice parameter.
#[derive(Debug, Clone, Copy)]
pub struct BufRef<'a> {
    /// The buffer's name.
    pub name: &'a Ident,
    /// `[k]`: the element of a buffer array.
    pub index: Option<&'a Expr>,
    /// `[lo..hi]`: the range of elements.
    pub range: Option<BoundsRef<'a>>,
}

/// [`Bounds`], borrowed.
#[derive(Debug, Clone, Copy)]
pub struct BoundsRef<'a> {
    /// The first element, 0 when left out.
    pub start: Option<&'a Expr>,
    /// One past the last element, the length when left out.
    pub end: Option<&'a Expr>,
    /// The brackets' span.
    pub span: Span,
}

impl<'a> BufRef<'a> {
    /// Whether it has a subscript.
    pub fn is_subscripted(&self) -> bool {
        self.index.is_some() || self.range.is_some()
    }

    /// The expressions of its subscripts.
    pub fn subscript_exprs(&self) -> Vec<&'a Expr> {
        let mut exprs: Vec<&Expr> = self.index.into_iter().collect();
        if let Some(range) = self.range {
            exprs.extend(range.start);
            exprs.extend(range.end);
        }
        exprs
    }

    /// The buffer reference an expression is: `x`, `x[k]`, `x[a..b]` or `x[k][a..b]`. A `..=`
    /// range, a range before an element, or a third subscript give `None`.
    pub fn of_expr(expr: &'a Expr) -> Option<BufRef<'a>> {
        match ungroup_expr(expr) {
            Expr::Index(outer) => {
                let (inner, last) = (&*outer.expr, &*outer.index);
                let span = outer.bracket_token.span.join();
                match (ungroup_expr(inner), bounds_ref(last, span)) {
                    (Expr::Index(first), Some(range)) => {
                        if matches!(ungroup_expr(&first.index), Expr::Range(_)) {
                            return None;
                        }
                        Some(BufRef {
                            name: bare_ident(&first.expr)?,
                            index: Some(&first.index),
                            range: Some(range),
                        })
                    }
                    (_, Some(range)) => Some(BufRef {
                        name: bare_ident(inner)?,
                        index: None,
                        range: Some(range),
                    }),
                    (_, None) => {
                        if matches!(ungroup_expr(last), Expr::Range(_)) {
                            return None;
                        }
                        Some(BufRef {
                            name: bare_ident(inner)?,
                            index: Some(last),
                            range: None,
                        })
                    }
                }
            }
            _ => Some(BufRef {
                name: bare_ident(expr)?,
                index: None,
                range: None,
            }),
        }
    }
}

/// The bounds of a half-open range expression `a..b` (`..=` is not one).
fn bounds(expr: &Expr, span: Span) -> Option<Bounds> {
    bounds_ref(expr, span).map(|b| Bounds {
        start: b.start.cloned(),
        end: b.end.cloned(),
        span,
    })
}

fn bounds_ref(expr: &Expr, span: Span) -> Option<BoundsRef<'_>> {
    match ungroup_expr(expr) {
        Expr::Range(range) if matches!(range.limits, syn::RangeLimits::HalfOpen(_)) => {
            Some(BoundsRef {
                start: range.start.as_deref(),
                end: range.end.as_deref(),
                span,
            })
        }
        _ => None,
    }
}

/// `name` followed by up to two bracketed subscripts, as `copy` and `fill` name buffers.
fn parse_buffer_ref(input: ParseStream<'_>) -> syn::Result<BufferRef> {
    let name: Ident = input.parse()?;
    let mut reference = BufferRef::bare(name);
    while input.peek(token::Bracket) {
        let content;
        let bracket = bracketed!(content in input);
        let expr: Expr = content.parse()?;
        let span = bracket.span.join();
        if let Expr::Range(range) = ungroup_expr(&expr)
            && matches!(range.limits, syn::RangeLimits::Closed(_))
        {
            return Err(syn::Error::new(
                span,
                "a buffer range is half-open: write `x[a..b]` for elements a to b - 1",
            ));
        }
        match bounds(&expr, span) {
            Some(range) if reference.range.is_none() => reference.range = Some(range),
            None if reference.index.is_none() && reference.range.is_none() => {
                reference.index = Some(expr)
            }
            _ => {
                return Err(syn::Error::new(
                    span,
                    "a buffer takes at most an element and a range: `xs[k]`, `x[a..b]` or \
                     `xs[k][a..b]`",
                ));
            }
        }
    }
    Ok(reference)
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

impl Parse for Pipeline {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let pipeline_token = input.parse()?;
        let name = input.parse()?;
        let content;
        braced!(content in input);
        let mut items = Vec::new();
        while !content.is_empty() {
            items.push(content.parse()?);
        }
        Ok(Pipeline {
            attrs,
            vis,
            pipeline_token,
            name,
            items,
        })
    }
}

impl Parse for Item {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::streams) {
            let keyword = input.parse()?;
            let streams = braced_list(input)?;
            Ok(Item::Streams(Streams {
                attrs,
                keyword,
                streams,
            }))
        } else if lookahead.peek(kw::kernels) {
            parse_module(input, attrs, None).map(Item::Kernels)
        } else if input.peek(Token![unsafe]) && input.peek2(kw::kernels) {
            let unsafe_token = input.parse()?;
            parse_module(input, attrs, Some(unsafe_token)).map(Item::Kernels)
        } else if lookahead.peek(kw::params) {
            let keyword = input.parse()?;
            let params = braced_list(input)?;
            Ok(Item::Params(Params {
                attrs,
                keyword,
                params,
            }))
        } else if lookahead.peek(kw::scratch) {
            let keyword = input.parse()?;
            let buffers = braced_list(input)?;
            Ok(Item::Scratch(ScratchBlock {
                attrs,
                keyword,
                buffers,
            }))
        } else if lookahead.peek(kw::stage) {
            parse_stage(input, attrs).map(Item::Stage)
        } else if lookahead.peek(Token![for]) {
            parse_for(input).map(Item::For)
        } else if lookahead.peek(kw::step) && input.peek2(Ident) {
            let keyword = input.parse()?;
            let name = input.parse()?;
            let content;
            braced!(content in input);
            let mut items = Vec::new();
            while !content.is_empty() {
                items.push(content.parse()?);
            }
            Ok(Item::Step(StepBlock {
                attrs,
                keyword,
                name,
                items,
            }))
        } else if lookahead.peek(kw::swap) {
            Ok(Item::Swap(input.parse()?))
        } else if lookahead.peek(kw::concurrent) {
            let keyword = input.parse()?;
            let content;
            parenthesized!(content in input);
            let stages = Punctuated::parse_terminated(&content)?;
            input.parse::<Token![;]>()?;
            Ok(Item::Concurrent(Concurrent { keyword, stages }))
        } else if lookahead.peek(kw::devices) {
            let keyword = input.parse()?;
            let devices = braced_list(input)?;
            Ok(Item::Devices(Devices {
                attrs,
                keyword,
                devices,
            }))
        } else {
            Err(lookahead.error())
        }
    }
}

/// `{ a, b, c }` with an optional trailing comma.
fn braced_list<T: Parse>(input: ParseStream<'_>) -> syn::Result<Vec<T>> {
    let content;
    braced!(content in input);
    let list = Punctuated::<T, Token![,]>::parse_terminated(&content)?;
    Ok(list.into_iter().collect())
}

impl Parse for Stream {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name: Ident = input.parse()?;
        let count = if input.peek(token::Bracket) {
            let content;
            bracketed!(content in input);
            Some(content.parse()?)
        } else {
            None
        };
        let mut priority = None;
        let mut non_blocking = None;
        if input.peek(token::Paren) {
            let content;
            parenthesized!(content in input);
            while !content.is_empty() {
                let lookahead = content.lookahead1();
                if lookahead.peek(kw::priority) {
                    let keyword: kw::priority = content.parse()?;
                    content.parse::<Token![=]>()?;
                    if priority.replace(content.call(parse_priority)?).is_some() {
                        let message = format!("`priority` set twice on stream `{name}`; keep one");
                        return Err(syn::Error::new(keyword.span, message));
                    }
                } else if lookahead.peek(kw::non_blocking) {
                    let keyword: kw::non_blocking = content.parse()?;
                    if non_blocking.replace(keyword).is_some() {
                        let message =
                            format!("`non_blocking` set twice on stream `{name}`; keep one");
                        return Err(syn::Error::new(keyword.span, message));
                    }
                } else {
                    return Err(lookahead.error());
                }
                if !content.is_empty() {
                    content.parse::<Token![,]>()?;
                }
            }
        }
        let device = OnDevice::parse_optional(input)?;
        Ok(Stream {
            attrs,
            name,
            priority,
            non_blocking,
            device,
            count,
        })
    }
}

/// `high`, `low`, `default` or an integer (CUDA's convention: lower numbers run first).
fn parse_priority(input: ParseStream<'_>) -> syn::Result<PriorityOption> {
    let span = input.span();
    let lookahead = input.lookahead1();
    let level = if lookahead.peek(kw::high) {
        input.parse::<kw::high>()?;
        Priority::High
    } else if lookahead.peek(kw::low) {
        input.parse::<kw::low>()?;
        Priority::Low
    } else if lookahead.peek(kw::default) {
        input.parse::<kw::default>()?;
        Priority::Default
    } else if lookahead.peek(LitInt) || lookahead.peek(Token![-]) {
        let negative = input.parse::<Option<Token![-]>>()?.is_some();
        let literal: LitInt = input.parse()?;
        let magnitude: i64 = literal.base10_parse()?;
        let value = if negative { -magnitude } else { magnitude };
        let value = i32::try_from(value)
            .map_err(|_| syn::Error::new(literal.span(), "stream priority must fit in an `i32`"))?;
        Priority::Value(value)
    } else {
        return Err(lookahead.error());
    };
    Ok(PriorityOption { level, span })
}

fn parse_module(
    input: ParseStream<'_>,
    attrs: Vec<Attribute>,
    unsafe_token: Option<Token![unsafe]>,
) -> syn::Result<Module> {
    let keyword = input.parse()?;
    let name = input.parse()?;
    input.parse::<Token![=]>()?;
    let format_span = input.span();
    let lookahead = input.lookahead1();
    let format = if lookahead.peek(kw::ptx) {
        input.parse::<kw::ptx>()?;
        ImageFormat::Ptx
    } else if lookahead.peek(kw::cubin) {
        input.parse::<kw::cubin>()?;
        ImageFormat::Cubin
    } else if lookahead.peek(kw::fatbin) {
        input.parse::<kw::fatbin>()?;
        ImageFormat::Fatbin
    } else if lookahead.peek(kw::cuda_c) {
        input.parse::<kw::cuda_c>()?;
        ImageFormat::CudaC
    } else {
        return Err(lookahead.error());
    };
    let image_content;
    parenthesized!(image_content in input);
    let image = image_content.parse()?;
    let content;
    braced!(content in input);
    let mut kernels = Vec::new();
    while !content.is_empty() {
        kernels.push(content.parse()?);
    }
    Ok(Module {
        unsafe_token,
        attrs,
        keyword,
        name,
        format,
        format_span,
        image,
        kernels,
    })
}

impl Parse for Kernel {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let fn_token = input.parse()?;
        let name: Ident = input.parse()?;
        let content;
        parenthesized!(content in input);
        let params = Punctuated::<KernelParam, Token![,]>::parse_terminated(&content)?;
        let mut host = None;
        loop {
            let lookahead = input.lookahead1();
            if lookahead.peek(Token![;]) {
                input.parse::<Token![;]>()?;
                break;
            } else if lookahead.peek(kw::cpu) || lookahead.peek(kw::host) {
                let keyword = if input.peek(kw::cpu) {
                    input.parse::<kw::cpu>()?.span
                } else {
                    input.parse::<kw::host>()?.span
                };
                input.parse::<Token![=]>()?;
                let path = input.call(Path::parse_mod_style)?;
                if host.replace(HostImpl { keyword, path }).is_some() {
                    let message = format!(
                        "the CPU implementation of kernel `{name}` is set twice; keep one `cpu = ...`"
                    );
                    return Err(syn::Error::new(keyword, message));
                }
            } else {
                return Err(lookahead.error());
            }
        }
        let params = params.into_iter().collect();
        Ok(Kernel {
            attrs,
            fn_token,
            name,
            params,
            host,
        })
    }
}

impl Parse for KernelParam {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        Ok(KernelParam { name, ty })
    }
}

impl Parse for Param {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        let device = OnDevice::parse_optional(input)?;
        Ok(Param {
            attrs,
            name,
            ty,
            device,
        })
    }
}

impl Parse for Scratch {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        let device = OnDevice::parse_optional(input)?;
        let len = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Scratch {
            attrs,
            name,
            ty,
            device,
            len,
        })
    }
}

fn parse_stage(input: ParseStream<'_>, attrs: Vec<Attribute>) -> syn::Result<Stage> {
    let keyword = input.parse()?;
    let name = input.parse()?;
    input.parse::<kw::on>()?;
    let stream = input.parse()?;
    let lane = if input.peek(token::Bracket) {
        let content;
        bracketed!(content in input);
        Some(content.parse()?)
    } else {
        None
    };
    let mut after = Vec::new();
    if input.peek(kw::after) {
        input.parse::<kw::after>()?;
        loop {
            after.push(input.parse()?);
            if !input.peek(Token![,]) {
                break;
            }
            input.parse::<Token![,]>()?;
        }
    }
    let content;
    braced!(content in input);
    let mut statements = Vec::new();
    while !content.is_empty() {
        statements.push(content.parse()?);
    }
    Ok(Stage {
        attrs,
        keyword,
        name,
        stream,
        lane,
        after,
        statements,
    })
}

/// `for i in START..END { let ...; stage ...; concurrent(...); }`.
fn parse_for(input: ParseStream<'_>) -> syn::Result<ForLoop> {
    let keyword = input.parse()?;
    let var = input.parse()?;
    input.parse::<Token![in]>()?;
    let range = input.call(Expr::parse_without_eager_brace)?;
    let (start, end) = match ungroup_expr(&range) {
        Expr::Range(syn::ExprRange {
            start: Some(start),
            limits: syn::RangeLimits::HalfOpen(_),
            end: Some(end),
            ..
        }) => ((**start).clone(), (**end).clone()),
        _ => {
            return Err(syn::Error::new_spanned(
                &range,
                "a pipeline `for` runs over a half-open range: `for i in START..END`",
            ));
        }
    };
    let content;
    braced!(content in input);
    let mut lets = Vec::new();
    while content.peek(Token![let]) {
        let keyword = content.parse()?;
        let name = content.parse()?;
        content.parse::<Token![=]>()?;
        let value = content.parse()?;
        content.parse::<Token![;]>()?;
        lets.push(Let {
            keyword,
            name,
            value,
        });
    }
    let mut items = Vec::new();
    while !content.is_empty() {
        items.push(content.parse()?);
    }
    Ok(ForLoop {
        keyword,
        var,
        start,
        end,
        lets,
        items,
    })
}

impl Parse for Statement {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(Token![while])
            || input.peek(Token![if])
            || input.peek(Token![do])
            || input.peek(kw::switch)
        {
            return Ok(Statement::Control(Box::new(input.parse()?)));
        }
        if let Some((word, _)) = input.cursor().ident()
            && NOT_CAPTURABLE.iter().any(|symbol| word == *symbol)
        {
            return parse_not_capturable(input).map(Statement::NotCapturable);
        }
        let lookahead = input.lookahead1();
        let statement = if lookahead.peek(kw::launch) {
            Statement::Launch(Box::new(input.call(parse_launch)?))
        } else if lookahead.peek(kw::copy) {
            let keyword = input.parse()?;
            let src_ref = input.call(parse_buffer_ref)?;
            input.parse::<Token![->]>()?;
            let dst_ref = input.call(parse_buffer_ref)?;
            Statement::Copy(Box::new(Copy {
                keyword,
                src: src_ref.name.clone(),
                src_ref,
                dst: dst_ref.name.clone(),
                dst_ref,
            }))
        } else if lookahead.peek(kw::fill) {
            let keyword = input.parse()?;
            let dst_ref = input.call(parse_buffer_ref)?;
            input.parse::<Token![=]>()?;
            let value = input.parse()?;
            Statement::Fill(Box::new(Fill {
                keyword,
                dst: dst_ref.name.clone(),
                dst_ref,
                value,
            }))
        } else if lookahead.peek(kw::wait) {
            Statement::Wait(input.call(parse_wait)?)
        } else if lookahead.peek(kw::write) {
            let keyword = input.parse()?;
            let flag = input.parse()?;
            input.parse::<Token![=]>()?;
            let value = input.parse()?;
            Statement::Write(Write {
                keyword,
                flag,
                value,
            })
        } else if lookahead.peek(kw::host) {
            let keyword = input.parse()?;
            let closure = input.parse()?;
            let accesses = input.call(parse_accesses)?;
            Statement::Host(Host {
                keyword,
                closure,
                accesses,
            })
        } else if lookahead.peek(kw::call) {
            let keyword = input.parse()?;
            let call = input.call(parse_call)?;
            let accesses = input.call(parse_accesses)?;
            Statement::Call(Call {
                keyword,
                call,
                accesses,
            })
        } else if collective::peek(&lookahead) {
            Statement::Comm(Box::new(input.parse()?))
        } else {
            return Err(lookahead.error());
        };
        input.parse::<Token![;]>()?;
        Ok(statement)
    }
}

fn parse_not_capturable(input: ParseStream<'_>) -> syn::Result<NotCapturable> {
    let word = input.parse()?;
    let mut rest = TokenStream::new();
    while !input.is_empty() && !input.peek(Token![;]) {
        rest.extend([input.parse::<TokenTree>()?]);
    }
    input.parse::<Token![;]>()?;
    Ok(NotCapturable { word, rest })
}

fn parse_launch(input: ParseStream<'_>) -> syn::Result<Launch> {
    let keyword = input.parse()?;
    let path = input.call(Path::parse_mod_style)?;
    let content;
    let paren = parenthesized!(content in input);
    let (args, ranks) = parse_launch_args(&content)?;
    let (mut grid, mut block, mut shared) = (None, None, None);
    let mut peer: Option<PeerClause> = None;
    // One arm per clause; each may appear once, in any order.
    while !input.peek(Token![;]) {
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::peer) {
            let span = input.parse::<kw::peer>()?.span;
            let content;
            parenthesized!(content in input);
            let names = Punctuated::parse_terminated(&content)?;
            if peer.replace(PeerClause { span, names }).is_some() {
                let message =
                    "`peer` set twice in one `launch`; name every buffer in one `peer(..)`";
                return Err(syn::Error::new(span, message));
            }
            continue;
        }
        let (slot, word) = if lookahead.peek(kw::grid) {
            (&mut grid, "grid")
        } else if lookahead.peek(kw::block) {
            (&mut block, "block")
        } else if lookahead.peek(kw::shared) {
            (&mut shared, "shared")
        } else {
            return Err(lookahead.error());
        };
        let span = input.parse::<Ident>()?.span();
        let value = input.call(Expr::parse_without_eager_brace)?;
        if slot.replace(LaunchOption { span, value }).is_some() {
            let message = format!("`{word}` set twice in one `launch`; keep one");
            return Err(syn::Error::new(span, message));
        }
    }
    Ok(Launch {
        keyword,
        path,
        paren,
        args,
        ranks,
        grid,
        block,
        shared,
        peer,
    })
}

/// A launch's arguments, each an expression with `on rank EXPR` after it where it names a
/// neighbour's part of a window.
type LaunchArgs = (Punctuated<Expr, Token![,]>, Vec<Option<OnRank>>);

fn parse_launch_args(content: ParseStream<'_>) -> syn::Result<LaunchArgs> {
    let mut args = Punctuated::new();
    let mut ranks = Vec::new();
    while !content.is_empty() {
        args.push_value(content.parse::<Expr>()?);
        ranks.push(if content.peek(kw::on) {
            let on = content.parse()?;
            let rank = content.parse::<kw::rank>().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "a window argument another rank holds is `w on rank EXPR` (or \
                     `w[lo..hi] on rank EXPR`)",
                )
            })?;
            Some(OnRank {
                on,
                rank,
                expr: content.parse()?,
            })
        } else {
            None
        });
        if content.is_empty() {
            break;
        }
        args.push_punct(content.parse()?);
    }
    Ok((args, ranks))
}

fn parse_wait(input: ParseStream<'_>) -> syn::Result<Wait> {
    let keyword = input.parse()?;
    let flag = input.parse()?;
    let lookahead = input.lookahead1();
    let condition = if lookahead.peek(Token![==]) {
        input.parse::<Token![==]>()?;
        WaitCondition::Equal
    } else if lookahead.peek(Token![>=]) {
        input.parse::<Token![>=]>()?;
        WaitCondition::AtLeast
    } else if lookahead.peek(Token![&]) {
        input.parse::<Token![&]>()?;
        WaitCondition::AnyBit
    } else {
        return Err(lookahead.error());
    };
    let value = input.parse()?;
    Ok(Wait {
        keyword,
        flag,
        condition,
        value,
    })
}

fn parse_call(input: ParseStream<'_>) -> syn::Result<ExprCall> {
    let expr = input.call(Expr::parse_without_eager_brace)?;
    match ungroup_expr(&expr) {
        Expr::Call(call) => Ok(call.clone()),
        _ => Err(syn::Error::new_spanned(
            &expr,
            "`call` takes a function call, e.g. `call crate::blas::gemv(a, x, y)`",
        )),
    }
}

/// The `reads(...)` / `writes(...)` clauses, each at most once, in either order.
fn parse_accesses(input: ParseStream<'_>) -> syn::Result<Accesses> {
    let mut accesses = Accesses::default();
    while !input.peek(Token![;]) {
        let lookahead = input.lookahead1();
        let (slot, word) = if lookahead.peek(kw::reads) {
            (&mut accesses.reads, "reads")
        } else if lookahead.peek(kw::writes) {
            (&mut accesses.writes, "writes")
        } else {
            return Err(lookahead.error());
        };
        let span = input.parse::<Ident>()?.span();
        let content;
        parenthesized!(content in input);
        let names = Punctuated::parse_terminated(&content)?;
        if slot.replace(AccessList { span, names }).is_some() {
            let message = format!("`{word}(...)` given twice; list every buffer in one");
            return Err(syn::Error::new(span, message));
        }
    }
    Ok(accesses)
}

/// Looks through the invisible groups that `macro_rules!` puts around `$t:ty`, and through
/// parentheses, which never change a type.
pub fn ungroup_type(mut ty: &Type) -> &Type {
    loop {
        match ty {
            Type::Group(group) => ty = &group.elem,
            Type::Paren(paren) => ty = &paren.elem,
            _ => return ty,
        }
    }
}

/// Looks through invisible groups (`$e:expr`) and parentheses around an expression.
pub fn ungroup_expr(mut expr: &Expr) -> &Expr {
    loop {
        match expr {
            Expr::Group(group) => expr = &group.expr,
            Expr::Paren(paren) => expr = &paren.expr,
            _ => return expr,
        }
    }
}

/// The ident an expression consists of, if it is a bare name such as `field`.
pub fn bare_ident(expr: &Expr) -> Option<&Ident> {
    match ungroup_expr(expr) {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => path.path.get_ident(),
        _ => None,
    }
}

/// Tokens printed the way a person writes them: `&mut DeviceBuffer<f32>`, not
/// `& mut DeviceBuffer < f32 >`, for messages and for comparing types by spelling.
pub fn tokens_string<T: ToTokens>(tokens: &T) -> String {
    let mut text = tokens.to_token_stream().to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        ("& ", "&"),
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        (" ;", ";"),
        ("[ ", "["),
        (" ]", "]"),
        ("( ", "("),
        (" )", ")"),
        (" (", "("),
        (" .", "."),
        (" !(", "!("),
        (" ![", "!["),
        (" !{", "!{"),
        ("* mut ", "*mut "),
        ("* const ", "*const "),
        (". ", "."),
    ] {
        text = text.replace(from, to);
    }
    text
}

/// A type as the user writes it, looking through invisible groups.
pub fn type_string(ty: &Type) -> String {
    tokens_string(ungroup_type(ty))
}
