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
    parenthesized, token,
};

use crate::symbol::{NOT_CAPTURABLE, kw};

mod collective;
mod control;
mod device;
mod mentions;

pub use collective::{Comm, CommOp, Operand};
pub use control::{Comparison, Condition, Control, flatten};
pub use device::{Device, Devices, OnDevice};
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

/// `fn stencil(nx: u32, src: &[f32], dst: &mut [f32]) cpu = path;`.
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
    /// Its type: a scalar, `&[T]` (read) or `&mut [T]` (written), or `&[T; BOUND]` and
    /// `&mut [T; BOUND]` for a buffer the kernel indexes only below `BOUND`.
    pub ty: Type,
}

/// What a kernel parameter's type means to the macro.
#[derive(Debug, Clone, Copy)]
pub enum KernelParamType<'a> {
    /// Passed by value.
    Scalar(&'a Type),
    /// `&[T]` (`mutable == false`) or `&mut [T]`, with `; BOUND` inside the brackets when
    /// declared.
    Slice {
        /// Whether the kernel writes through it.
        mutable: bool,
        /// The element type `T`.
        elem: &'a Type,
        /// The bound below which the kernel indexes it: the `n` of `&mut [f32; n]`.
        bound: Option<&'a Expr>,
    },
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
                },
                // Not an array reference: a buffer of any length, indexed below the bound.
                Type::Array(array) => KernelParamType::Slice {
                    mutable: reference.mutability.is_some(),
                    elem: ungroup_type(&array.elem),
                    bound: Some(&array.len),
                },
                _ => KernelParamType::Unsupported,
            },
            Type::Slice(_) | Type::Ptr(_) => KernelParamType::Unsupported,
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
    Copy(Copy),
    /// `fill dst = VALUE;`.
    Fill(Fill),
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
    /// `grid EXPR`: blocks per grid, `x`, `(x, y)` or `(x, y, z)`.
    pub grid: Option<LaunchOption>,
    /// `block EXPR`: threads per block, same forms.
    pub block: Option<LaunchOption>,
    /// `shared EXPR`: dynamic shared memory in bytes.
    pub shared: Option<LaunchOption>,
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
    /// The buffer written.
    pub dst: Ident,
}

/// `fill dst = VALUE;`.
#[derive(Debug)]
pub struct Fill {
    /// The `fill` keyword.
    pub keyword: kw::fill,
    /// The buffer written.
    pub dst: Ident,
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

impl Pipeline {
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

    /// Every stage in program order.
    pub fn stages(&self) -> impl Iterator<Item = &Stage> {
        self.items.iter().filter_map(|item| match item {
            Item::Stage(stage) => Some(stage),
            _ => None,
        })
    }

    /// Every declared device, over all `devices` blocks.
    pub fn devices(&self) -> impl Iterator<Item = &Device> {
        self.items.iter().flat_map(|item| match item {
            Item::Devices(block) => block.devices.as_slice(),
            _ => &[],
        })
    }

    /// Every `concurrent(...)` claim.
    pub fn claims(&self) -> impl Iterator<Item = &Concurrent> {
        self.items.iter().filter_map(|item| match item {
            Item::Concurrent(claim) => Some(claim),
            _ => None,
        })
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
        after,
        statements,
    })
}

impl Parse for Statement {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(Token![while]) || input.peek(Token![if]) {
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
            let src = input.parse()?;
            input.parse::<Token![->]>()?;
            let dst = input.parse()?;
            Statement::Copy(Copy { keyword, src, dst })
        } else if lookahead.peek(kw::fill) {
            let keyword = input.parse()?;
            let dst = input.parse()?;
            input.parse::<Token![=]>()?;
            let value = input.parse()?;
            Statement::Fill(Fill {
                keyword,
                dst,
                value,
            })
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
    let args = Punctuated::parse_terminated(&content)?;
    let (mut grid, mut block, mut shared) = (None, None, None);
    // One arm per clause; each may appear once, in any order.
    while !input.peek(Token![;]) {
        let lookahead = input.lookahead1();
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
        grid,
        block,
        shared,
    })
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
