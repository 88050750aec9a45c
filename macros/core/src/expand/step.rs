//! One step: binding the params, and enqueueing each stage's statements in the lowered order
//! with exactly the lowered waits and records.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, Ident};

use super::names::{Names, rt, rt_fn};
use crate::ast::{self, KernelParamType, type_string};
use crate::lower::{
    Arg, BufferId, CallArg, KernelId, Memory, Mode, Pipeline, Stage, StageId, StatementKind,
    WaitCondition,
};

/// `let` bindings that give every param and scratch buffer its declared name inside
/// generated code: scalars by value, buffers reborrowed (`&mut *` for `&mut`).
pub fn bindings(pipeline: &Pipeline<'_>, names: &Names, params: &TokenStream) -> TokenStream {
    let rt = rt();
    let scalars = pipeline.scalars.iter().map(|scalar| {
        let name = &scalar.decl.name;
        quote!(let #name = #params.#name;)
    });
    let buffers = pipeline.buffers.iter().map(|b| {
        let name = b.ident;
        if b.scratch {
            // `field` is the destructured `&mut Option<buffer>` of the pipeline.
            let field = names.scratch_field(name);
            let label = name.to_string();
            quote!(let #name = #rt::scratch(#field.as_mut(), #label)?;)
        } else if b.mutable {
            quote!(let #name = &mut *#params.#name;)
        } else {
            quote!(let #name = &*#params.#name;)
        }
    });
    quote!(#(#scalars)* #(#buffers)*)
}

/// The reborrow of buffer `name` for one use.
fn reborrow(name: &Ident, mode: Mode) -> TokenStream {
    match mode {
        Mode::Read => quote!(&*#name),
        Mode::Write => quote!(&mut *#name),
    }
}

/// `fn __prepare(&mut self, params)`: allocates scratch buffers whose size changed. It runs
/// before a capture begins, since allocation cannot be captured.
pub fn prepare_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let scalars = pipeline.scalars.iter().map(|scalar| {
        let name = &scalar.decl.name;
        quote!(let #name = __p.#name;)
    });
    let params = pipeline.buffers.iter().filter(|b| !b.scratch).map(|b| {
        let name = b.ident;
        quote!(let #name = &*__p.#name;)
    });
    let sized = pipeline
        .buffers
        .iter()
        .filter(|b| b.scratch)
        .filter_map(|b| {
            let len = b.len?;
            let field = names.scratch_field(b.ident);
            let referent = b.referent;
            let ctx = super::device::scratch_context(pipeline, b.device);
            Some(quote! {
                let __len: usize = #len;
                #rt::ensure_scratch::<#referent>(&mut self.#field, #ctx, __len)?;
            })
        });
    quote! {
        #[allow(unused_variables, clippy::all)]
        fn __prepare(&mut self, __p: &#params_ty) -> #rt::Result<()> {
            #(#scalars)*
            #(#params)*
            #(#sized)*
            ::core::result::Result::Ok(())
        }
    }
}

/// `fn __enqueue(&mut self, params)`: the whole step.
pub fn enqueue_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let name = pipeline.name.as_str();
    let stream_fields: Vec<Ident> = (0..pipeline.streams.len())
        .map(|i| names.stream_field(i))
        .collect();
    let scratch_fields: Vec<Ident> = pipeline
        .buffers
        .iter()
        .filter(|b| b.scratch)
        .map(|b| names.scratch_field(b.ident))
        .collect();
    let bind = bindings(pipeline, names, &quote!(__p));
    let event_of = |stage: StageId| pipeline.events.iter().position(|&s| s == stage);

    // The first stage of each forked stream waits on the fork event.
    let mut fork_pending: Vec<bool> = (0..pipeline.streams.len())
        .map(|i| pipeline.fork.iter().any(|s| s.0 == i))
        .collect();
    let fork_record = if pipeline.fork.is_empty() {
        quote!()
    } else {
        quote!(#rt::Stream::record_into(__stream_0, __fork)?;)
    };

    let stages = pipeline.order.iter().enumerate().map(|(index, &stage_id)| {
        let stage = &pipeline.stages[stage_id.0];
        let stream = &stream_fields[stage.stream.0];
        let stage_name = stage.name.as_str();
        let mut waits = Vec::new();
        if std::mem::take(&mut fork_pending[stage.stream.0]) {
            waits.push(quote!(#rt::Stream::wait_event(__stream, __fork)));
        }
        for edge in pipeline.edges.iter().filter(|e| e.to == stage_id) {
            if let Some(k) = event_of(edge.from) {
                waits.push(quote!(#rt::Stream::wait_event(__stream, &__events[#k])));
            }
        }
        let statements: Vec<TokenStream> =
            super::collective::stage_statements(pipeline, stage, |kind| {
                statement_tokens(pipeline, stage, kind)
            });
        let record =
            event_of(stage_id).map(|k| quote!(#rt::Stream::record_into(__stream, &__events[#k])?;));
        let stream_index = stage.stream.0;
        // The stage's 1-based place in the step, as `__STAGE_SITES` lists it.
        let position = index as u32 + 1;
        let mark = quote!(__progress.mark(__stream, #stream_index, #position)?;);
        let profile_start = quote! {
            if let ::core::option::Option::Some(profiler) = __profile {
                profiler.stage_start(__stream, #index)?;
            }
        };
        let profile_end = quote! {
            if let ::core::option::Option::Some(profiler) = __profile {
                profiler.stage_end(__stream, #index)?;
            }
        };
        quote! {
            {
                let __stream: &#rt::Stream = #stream;
                let __result: #rt::Result<()> = (|| {
                                        #(#waits?;)*
                    #profile_start
                    #(#statements)*
                    #profile_end
                    ::core::result::Result::Ok(())
                })();
                                __result.map_err(|e| #rt::stage_error(#name, #stage_name, e))?;
                #mark
                #record
            }
        }
    });
    let stages: Vec<TokenStream> = stages.collect();

    let joins = pipeline.join.iter().filter_map(|stream| {
        let last = pipeline
            .order
            .iter()
            .rev()
            .find(|&&s| pipeline.stages[s.0].stream == *stream)?;
        let k = event_of(*last)?;
        Some(quote!(#rt::Stream::wait_event(__stream_0, &__events[#k])?;))
    });

    quote! {
        #[allow(unused_variables, unused_mut, unused_braces, clippy::all)]
                fn __enqueue(&mut self, __p: &mut #params_ty, __profile: ::core::option::Option<&#rt::Profiler>) -> #rt::Result<()> {
                        let Self { __fork, __events, __kernels, __progress, #(#stream_fields,)* #(#scratch_fields,)* .. } = self;
                        __progress.reset(__stream_0)?;
            if let ::core::option::Option::Some(profiler) = __profile {
                profiler.step_start(__stream_0)?;
            }
            #bind
            #fork_record
            #(#stages)*
            #(#joins)*
            ::core::result::Result::Ok(())
        }
    }
}

/// The tokens of one statement of `stage`, inside the stage's closure where `__stream` is its
/// stream.
fn statement_tokens(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    kind: &StatementKind<'_>,
) -> TokenStream {
    let rt = rt();
    let buffer = |id: &BufferId| pipeline.buffers[id.0].ident;
    match kind {
        StatementKind::Launch {
            source,
            kernel,
            args,
        } => {
            let device = pipeline.streams[stage.stream.0].device;
            let field = format_ident!("{}", super::names::kernel_field_name(*kernel, device));
            let (config, args) = launch_parts(pipeline, source, *kernel, args, Retype::Assert);
            quote!(__kernels.#field.launch(__stream, #config, #args)?;)
        }
        StatementKind::Copy { source, src, dst } => {
            let dst_tokens = retyped_mut(pipeline, *dst, pipeline.buffers[src.0].elem, &source.dst);
            let src = buffer(src);
            quote!(#rt::copy(__stream, &*#src, #dst_tokens)?;)
        }
        StatementKind::Fill { source, dst } => {
            let dst = buffer(dst);
            let value = &source.value;
            // A value of the wrong type is reported on it, with the call on `fill`.
            let fill = rt_fn(source.keyword.span, "fill");
            quote!(#fill(__stream, &mut *#dst, #value)?;)
        }
        StatementKind::Wait {
            source,
            flag,
            condition,
        } => {
            let flag = buffer(flag);
            let value = &source.value;
            let condition = match condition {
                WaitCondition::Equal => quote!(#rt::WaitCondition::Equal),
                WaitCondition::AtLeast => quote!(#rt::WaitCondition::GreaterOrEqual),
                WaitCondition::AnyBit => quote!(#rt::WaitCondition::And),
            };
            let wait_flag = rt_fn(source.keyword.span, "wait_flag");
            quote!(#wait_flag(__stream, &*#flag, #condition, #value)?;)
        }
        StatementKind::Write { source, flag } => {
            let flag = buffer(flag);
            let value = &source.value;
            let write_flag = rt_fn(source.keyword.span, "write_flag");
            quote!(#write_flag(__stream, &*#flag, #value)?;)
        }
        StatementKind::Host { source, .. } => {
            let closure = &source.closure;
            quote_spanned!(closure.span()=> #rt::host_closure(__stream, #closure)?;)
        }
        StatementKind::Call { source, args, .. } => call_tokens(pipeline, stage, source, args),
        // Grouped with their neighbours by `collective::stage_statements`.
        StatementKind::Comm { .. } => quote!(),
    }
}

/// A `call`: the function gets the stage's stream as a `TypedStream` of the stream's marker,
/// then each buffer as its `reads(...)`/`writes(...)` clause declares it.
fn call_tokens(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    source: &ast::Call,
    args: &[CallArg<'_>],
) -> TokenStream {
    let rt = rt();
    let stream = &pipeline.streams[stage.stream.0];
    let marker = format_ident!("{}", stream.marker, span = pipeline.input.name.span());
    let label = format!("{}.{}", pipeline.input.name, stream.name);
    // Spanned on the stage's `on STREAM`, so a function typed for another stream reports it
    // there.
    let typed = Ident::new("__typed", stage.decl.stream.span());
    let func = &source.call.func;
    let mut shadows: Vec<(BufferId, Mode)> = Vec::new();
    let args: Vec<TokenStream> = args
        .iter()
        .map(|arg| match arg {
            CallArg::Buffer {
                name,
                mode: Mode::Write,
                ..
            } => quote_spanned!(name.span()=> &mut *#name),
            CallArg::Buffer {
                name,
                declared: Mode::Read,
                ..
            } => {
                // A function that takes it mutably fails here, on the name, with a message
                // that says to declare it in `writes(...)`.
                let read_access = rt_fn(name.span(), "read_access");
                quote_spanned!(name.span()=> #read_access(&*#name))
            }
            CallArg::Buffer { name, .. } => quote_spanned!(name.span()=> &*#name),
            CallArg::Expr { expr, buffers } => {
                for buffer in buffers {
                    if !shadows.contains(buffer) {
                        shadows.push(*buffer);
                    }
                }
                quote!(#expr)
            }
        })
        .collect();
    // Inside an expression, a buffer is seen only as declared: `&` for `reads(...)`.
    let shadows = shadows.iter().map(|&(buffer, mode)| {
        let name = pipeline.buffers[buffer.0].ident;
        let borrow = reborrow(name, mode);
        quote!(let #name = #borrow;)
    });
    let stream_arg = quote_spanned!(typed.span()=> &#typed);
    quote! {
        {
            let #typed = #rt::TypedStream::<#marker>::new(__stream, #label);
            #(#shadows)*
            #func(#stream_arg, #(#args),*)?;
        }
    }
}

/// `&mut *name` for the buffer `id`, seen as a buffer of `elem` when its own element type is
/// spelled differently: the compiler then checks, at `at`, that the two are one type.
fn retyped_mut(
    pipeline: &Pipeline<'_>,
    id: BufferId,
    elem: Option<&syn::Type>,
    at: &Ident,
) -> TokenStream {
    let buffer = &pipeline.buffers[id.0];
    let name = buffer.ident;
    let (Some(held), Some(elem)) = (buffer.elem, elem) else {
        return quote!(&mut *#name);
    };
    if type_string(held) == type_string(elem) {
        return quote!(&mut *#name);
    }
    let function = match buffer.memory {
        Memory::Pinned => "pinned_as_mut",
        _ => "device_as_mut",
    };
    let function = rt_fn(at.span(), function);
    quote_spanned!(at.span()=> #function::<#elem, _>(&mut *#name))
}

/// The launch configuration and argument tuple of a launch statement, over the bindings.
pub fn launch_parts(
    pipeline: &Pipeline<'_>,
    launch: &ast::Launch,
    kernel: KernelId,
    args: &[Arg],
    retype: Retype,
) -> (TokenStream, TokenStream) {
    let rt = rt();
    let dim = |option: &Option<ast::LaunchOption>| match option {
        Some(option) => {
            let value = &option.value;
            quote!(#value)
        }
        None => quote!(1u32),
    };
    let grid = dim(&launch.grid);
    let block = dim(&launch.block);
    let shared = launch.shared.as_ref().map(|s| {
        let value = &s.value;
        quote!(.with_shared_mem(#value))
    });
    let config = quote!(#rt::LaunchConfig::new(#grid, #block) #shared);
    // The kernel's declared parameters, so a type assertion quotes the user's own type.
    let declared = &pipeline.kernels[kernel.0].decl.params;
    let args = args
        .iter()
        .zip(&launch.args)
        .enumerate()
        .map(|(i, (arg, expr))| arg_tokens(pipeline, arg, expr, declared.get(i), retype));
    (config, quote!((#(#args,)*)))
}

/// How a launch argument passes a buffer whose element type is spelled differently from the
/// kernel parameter's (`DeviceBuffer<Real>` for `&[f32]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retype {
    /// Asserted when the program compiles, at the argument: what the step itself does.
    Assert,
    /// Checked when it runs: what a setter does, so a mismatch is reported once, by the step.
    Cast,
}

fn arg_tokens(
    pipeline: &Pipeline<'_>,
    arg: &Arg,
    expr: &Expr,
    declared: Option<&ast::KernelParam>,
    retype: Retype,
) -> TokenStream {
    let rt = rt();
    match arg {
        Arg::Buffer { buffer, mode } => {
            let held = &pipeline.buffers[buffer.0];
            let name = held.ident;
            // The argument as written, for spans.
            let at = ast::bare_ident(expr).unwrap_or(name);
            let wanted = match declared.map(ast::KernelParam::kind) {
                Some(KernelParamType::Slice { elem, .. }) => Some(elem),
                _ => None,
            };
            match (held.elem, wanted) {
                // Spelled differently (`Real` and `f32`): the compiler decides, at the name.
                (Some(held), Some(wanted)) if type_string(held) != type_string(wanted) => {
                    let borrow = reborrow(name, *mode);
                    match (retype, mode) {
                        (Retype::Assert, Mode::Read) => {
                            let function = rt_fn(at.span(), "device_as");
                            quote_spanned!(at.span()=> #function::<#wanted, _>(#borrow))
                        }
                        (Retype::Assert, Mode::Write) => {
                            let function = rt_fn(at.span(), "device_as_mut");
                            quote_spanned!(at.span()=> #function::<#wanted, _>(#borrow))
                        }
                        (Retype::Cast, Mode::Read) => {
                            quote!(#rt::device_cast::<#wanted, _>(#borrow)?)
                        }
                        (Retype::Cast, Mode::Write) => {
                            quote!(#rt::device_cast_mut::<#wanted, _>(#borrow)?)
                        }
                    }
                }
                _ => reborrow(name, *mode),
            }
        }
        Arg::Scalar {
            ty,
            assert_type: true,
            ..
        } => {
            // The declared type keeps its span, so rustc's "expected due to this" points at
            // the kernel's signature rather than at the whole macro call.
            let ty: syn::Type = match declared.map(ast::KernelParam::kind) {
                Some(KernelParamType::Scalar(declared)) => declared.clone(),
                _ => syn::parse_str(ty).unwrap_or_else(|_| syn::parse_quote!(_)),
            };
            // The type error, if any, lands on the user's argument.
            quote_spanned!(expr.span()=> { let __arg: #ty = #expr; __arg })
        }
        Arg::Scalar { .. } => quote!(#expr),
    }
}
