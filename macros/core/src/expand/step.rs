//! One step: binding the params, and enqueueing each stage's statements in the lowered order
//! with exactly the lowered waits and records.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::bounds::{self, LaunchSite, launch_sites};
use super::launch::{Retype, launch_parts, reborrow};
use super::names::{Names, rt, rt_fn};
use crate::ast::{self, type_string};
use crate::lower::{
    BufferId, CallArg, Memory, Mode, Pipeline, Stage, StageId, StatementKind, WaitCondition,
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
    let control_fields = super::control::destructured(pipeline);
    let step_start = super::control::eager_step_start(pipeline);
    let step_end = super::control::eager_step_end(pipeline);
    let event_of = |stage: StageId| pipeline.events.iter().position(|&s| s == stage);
    // Every bounded launch is checked before anything of the step is enqueued.
    let sites = launch_sites(pipeline);
    let bounded: Vec<&LaunchSite<'_>> = sites
        .iter()
        .filter(|site| bounds::bounded(pipeline, site.kernel))
        .collect();
    let refused = quote!(return ::core::result::Result::Err(__refusal););
    let checks = bounded
        .iter()
        .map(|site| bounds::check_first(pipeline, site, &refused));
    let checks: Vec<TokenStream> = checks.collect();
    let local_site = |stage: StageId, statement: usize| {
        bounded
            .iter()
            .find(|site| site.stage == stage && site.statement == statement)
            .map(|site| site.index)
    };

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
        let statements: Vec<TokenStream> = super::collective::stage_statements(
            pipeline,
            stage,
            |index, kind| statement_tokens(pipeline, stage, kind, local_site(stage_id, index)),
            |group| group,
        );
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
                        let Self { __fork, __events, __kernels, __progress, #(#stream_fields,)* #(#scratch_fields,)* #control_fields .. } = self;
            #bind
            #(#checks)*
                        __progress.reset(__stream_0)?;
            if let ::core::option::Option::Some(profiler) = __profile {
                profiler.step_start(__stream_0)?;
            }
            #step_start
            #fork_record
            #(#stages)*
            #(#joins)*
            #step_end
            ::core::result::Result::Ok(())
        }
    }
}

/// The tokens of one statement of `stage`, inside the stage's closure where `__stream` is its
/// stream. A launch whose bounds were checked first passes the locals of that check as its
/// scalar arguments (`locals`: its launch site).
pub(super) fn statement_tokens(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    kind: &StatementKind<'_>,
    locals: Option<usize>,
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
            let (config, args) =
                launch_parts(pipeline, source, *kernel, args, Retype::Assert, locals);
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
            // A value of the wrong type is reported on it, with the call on `fill` (the same
            // check as the built graph's, so that rustc reports it once).
            let fill_value = rt_fn(source.keyword.span, "fill_value");
            quote!({
                let __value = #fill_value(&*#dst, #value);
                #rt::fill_checked(__stream, &mut *#dst, __value)?;
            })
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
            let flag_value = rt_fn(source.keyword.span, "flag_value");
            quote!({
                let __value = #flag_value(&*#flag, #value);
                #rt::wait_flag_checked(__stream, &*#flag, #condition, __value)?;
            })
        }
        StatementKind::Write { source, flag } => {
            let flag = buffer(flag);
            let value = &source.value;
            let flag_value = rt_fn(source.keyword.span, "flag_value");
            quote!({
                let __value = #flag_value(&*#flag, #value);
                #rt::write_flag_checked(__stream, &*#flag, __value)?;
            })
        }
        StatementKind::Host { source, .. } => {
            let closure = &source.closure;
            quote_spanned!(closure.span()=> #rt::host_closure(__stream, #closure)?;)
        }
        StatementKind::Call { source, args, .. } => call_tokens(pipeline, stage, source, args),
        StatementKind::Control(control) => {
            let body = control
                .body
                .iter()
                .map(|statement| statement_tokens(pipeline, stage, &statement.kind, None))
                .collect();
            super::control::eager(pipeline, control, body)
        }
        // Grouped with their neighbours by `collective::stage_statements`.
        StatementKind::Comm { .. } => quote!(),
    }
}

/// A `call`: the function gets the stage's stream as a `TypedStream` of the stream's marker,
/// then each buffer as its `reads(...)`/`writes(...)` clause declares it.
pub(super) fn call_tokens(
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
pub(super) fn retyped_mut(
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
