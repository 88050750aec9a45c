//! A captured graph's `set_<scalar>` methods: in place where only kernel launches read the
//! scalar (checked against the kernels' bounds at once, applied at the next launch), by
//! building the step again where anything else does; and the guard that keeps a setter, swap
//! or recapture that panics half-way from leaving unchecked params launchable.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::bounds::{self, Keep, LaunchSite};
use super::names::{Names, rt, rt_fn};
use super::step::{bindings, used_scalars};
use crate::ast;
use crate::lower::{Memory, Pipeline, ScalarId, StatementKind};

/// What a replayed graph cannot update in place that reads `scalar`, in words: "`fill x` in
/// stage `a`", "the length of scratch buffer `acc`", "the shape of the step".
fn fixed_uses(pipeline: &Pipeline<'_>, scalar: ScalarId) -> Vec<String> {
    let mut uses = Vec::new();
    for stage in &pipeline.stages {
        for statement in &stage.statements {
            if !statement.scalars.contains(&scalar) {
                continue;
            }
            let what = match &statement.kind {
                // A launch that sets a condition is given the graph's handle, which an update
                // in place could not give it.
                StatementKind::Launch { source, args, .. }
                    if crate::lower::names_window(&pipeline.buffers, args) =>
                {
                    format!(
                        "`launch {}` (it exchanges through a window)",
                        crate::ast::tokens_string(&source.path)
                    )
                }
                StatementKind::Launch { source, args, .. } => {
                    let Some(condition) = args.iter().find_map(|arg| match arg {
                        crate::lower::Arg::Buffer { buffer, .. }
                            if pipeline.buffers[buffer.0].memory == Memory::Condition =>
                        {
                            Some(pipeline.buffers[buffer.0].name.as_str())
                        }
                        _ => None,
                    }) else {
                        continue;
                    };
                    format!(
                        "`launch {}` (it sets condition `{condition}`)",
                        crate::ast::tokens_string(&source.path)
                    )
                }
                StatementKind::Copy { .. } => "a `copy`".to_owned(),
                StatementKind::Fill { source, .. } => format!("`fill {}`", source.dst),
                StatementKind::Wait { source, .. } => format!("`wait {}`", source.flag),
                StatementKind::Write { source, .. } => format!("`write {}`", source.flag),
                StatementKind::Host { .. } => "a host closure".to_owned(),
                StatementKind::Call { source, .. } => {
                    format!("`call {}`", ast::function_name(&source.call))
                }
                // Its condition, maximum and body are baked into a conditional node, whose
                // body nodes are not updated in place.
                StatementKind::Control(control) => format!("a `{}`", control.source.word()),
                StatementKind::Comm { source, .. } => format!("`{}`", source.word()),
            };
            uses.push(format!("{what} in stage `{}`", stage.name));
        }
    }
    for buffer in &pipeline.buffers {
        if buffer.len_scalars.contains(&scalar) {
            uses.push(format!("the length of scratch buffer `{}`", buffer.name));
        }
    }
    if pipeline.structural.contains(&scalar) {
        uses.push(
            "the shape of the step (a loop bound, a `let`, a stream index or a buffer subscript)"
                .to_owned(),
        );
    }
    uses
}

/// `set_<scalar>`. A scalar that only kernel launches read is checked against the kernels'
/// bounds at once and marked stale in every instantiation, which updates its kernel nodes in
/// place at its next launch; one that anything else reads (a fill value, a flag value, a host
/// closure, a called function, a scratch length, the shape of the step) is baked into nodes a
/// replay cannot change, so its setter builds the step again; the setter of a scalar nothing
/// reads is a compile error that says so.
pub(super) fn setter(
    pipeline: &Pipeline<'_>,
    names: &Names,
    sites: &[LaunchSite<'_>],
    id: ScalarId,
) -> TokenStream {
    let rt = rt();
    let scalar = &pipeline.scalars[id.0];
    let param = scalar.decl;
    let field = &param.name;
    let ty = &param.ty;
    let setter = format_ident!("set_{}", param.name, span = param.name.span());
    let affected: Vec<&LaunchSite<'_>> = sites.iter().filter(|s| s.scalars.contains(&id)).collect();
    let fixed = fixed_uses(pipeline, id);
    if !fixed.is_empty() {
        let doc = format!(
            "Sets `{}` and builds the step again: it also feeds {}, which a replayed graph \
             cannot update in place. Waits for the launches in flight first. If the new step \
             cannot be built (a kernel's bound refuses the value, say), the graph keeps its \
             previous instantiations and `{}` its previous value.",
            scalar.name,
            fixed.join(", "),
            scalar.name,
        );
        // The scratch buffers whose length this scalar feeds are set aside, not dropped: the
        // current graph uses them, and gets them back if the new step is refused (otherwise
        // an in-place setter afterwards would point its nodes at buffers the graph's other
        // nodes do not use).
        let resized: Vec<Ident> = pipeline
            .buffers
            .iter()
            .filter(|b| b.scratch && b.len_scalars.contains(&id))
            .map(|b| names.scratch_field(b.ident))
            .collect();
        let recapture = if resized.is_empty() {
            quote!(self.__recapture())
        } else {
            quote! {{
                // Taken out, so counted as a change of the scratch buffers (an instantiation
                // of another graph built with them is built again, should this unwind); put
                // back with their count when the build is refused.
                let __epoch = self.pipeline.__scratch_epoch;
                let __kept = (#(self.pipeline.#resized.take(),)*);
                self.pipeline.__scratch_epoch = __epoch.wrapping_add(1);
                let __captured = self.__recapture();
                if __captured.is_err() {
                    (#(self.pipeline.#resized,)*) = __kept;
                    self.pipeline.__scratch_epoch = __epoch;
                }
                __captured
            }}
        };
        let guarded = outdate_on_unwind(
            quote!(()),
            quote! {
                let __previous = ::core::mem::replace(&mut self.params.#field, #field);
                let __captured = match self.__wait_launches().and_then(|()| self.__settle_lent(true)) {
                    ::core::result::Result::Ok(()) => #recapture,
                    ::core::result::Result::Err(e) => ::core::result::Result::Err(e),
                };
                if let ::core::result::Result::Err(e) = __captured {
                    self.params.#field = __previous;
                    return ::core::result::Result::Err(e);
                }
                ::core::result::Result::Ok(())
            },
        );
        return quote! {
            #[doc = #doc]
            pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> {
                #guarded
            }
        };
    }
    if affected.is_empty() {
        // Nothing to update: the setter exists to say so at compile time.
        // The bound is spanned on the param, so the compiler's notes point at it.
        let trait_path = rt_fn(param.name.span(), "ReadByTheStep");
        let bound = quote_spanned!(param.name.span()=> Self: #trait_path);
        return quote! {
            #[doc(hidden)]
            pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()>
            where
                #bound,
            {
                let _ = #field;
                ::core::result::Result::Ok(())
            }
        };
    }
    let name = &pipeline.input.name;
    let scratch_fields = names.scratch_fields(pipeline);
    // The bounds of every launch this scalar can break are checked, on every instance of the
    // current arrangement's plans, before anything changes; a refusal puts the previous value
    // back.
    let bounded: Vec<&LaunchSite<'_>> = affected
        .iter()
        .copied()
        .filter(|site| bounds::bounded(pipeline, site.kernel))
        .filter(|site| bounds::feeds_bound(pipeline, site, field))
        .collect();
    let checks = if bounded.is_empty() {
        TokenStream::new()
    } else {
        let bind = bindings(pipeline, names, &quote!(__p), &used_scalars(pipeline, true));
        let refused = quote! {
            __p.#field = __previous;
            return ::core::result::Result::Err(__refusal);
        };
        let walk = bounds::check_walk(
            pipeline,
            &bounded,
            &quote!(__plan),
            &quote!(&__plan.closed),
            &refused,
            Keep::No,
        );
        quote! {
            let Self { pipeline, params: __p, execs: __execs, swapped: __swapped, .. } = &mut *self;
            let #name { __kernels, __scratch_epoch, #(#scratch_fields,)* .. } = &mut **pipeline;
            #bind
            for __kind in 0..#name::__KINDS {
                // One built with other scratch buffers is built (and checked) again at its
                // next launch.
                let ::core::option::Option::Some(__captured) = __execs
                    .get((__kind << #name::__SWAPS) | *__swapped)
                    .and_then(::core::option::Option::as_ref)
                    .filter(|captured| captured.ready(*__scratch_epoch))
                else {
                    continue;
                };
                let __plan: &#rt::StepPlan = &__captured.plan;
                #walk
            }
        }
    };
    let bounds_doc = if bounded.is_empty() {
        String::new()
    } else {
        format!(
            " A value that breaks a kernel's bound is refused before anything changes: the \
             graph keeps its previous parameters and `{}` its previous value.",
            scalar.name
        )
    };
    let doc = format!(
        "Sets `{}` for the following launches: the next launch of each instantiation (or \
         `apply_updates`) updates the kernel nodes that read it in place (no re-capture, no \
         re-instantiation), each node once however many setters changed it.{bounds_doc}",
        scalar.name,
    );
    let index = id.0;
    let body = quote! {
        let __previous = ::core::mem::replace(&mut self.params.#field, #field);
        {
            #checks
        }
        for __stale in &mut self.stale {
            __stale[#index] = true;
        }
        // The check above covered the current arrangement only.
        let __arrangements = (1usize << #name::__SWAPS) - 1;
        for (__index, __known) in self.checked.iter_mut().enumerate() {
            if __index & __arrangements != self.swapped {
                *__known = false;
            }
        }
        ::core::result::Result::Ok(())
    };
    // Only the bounds' checks run the user's expressions: the setters of the hot path, with
    // none, pay nothing for the guard.
    let body = if bounded.is_empty() {
        body
    } else {
        outdate_on_unwind(quote!(()), body)
    };
    quote! {
        #[doc = #doc]
        #[allow(unused_variables, unused_braces, clippy::all)]
        pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> {
            #body
        }
    }
}

/// `body` (a method of the graph returning `Result<#ok>`) run so that a panic half-way (in a
/// user expression the step evaluates: a bound, a `for` range, a scratch length) outdates
/// every instantiation before it unwinds on: the params may then be ahead of what any
/// instantiation was built and checked with, so the next launch builds the step from them
/// again, checking them, instead of launching or updating nodes in place with values nothing
/// checked.
pub(super) fn outdate_on_unwind(ok: TokenStream, body: TokenStream) -> TokenStream {
    let rt = rt();
    quote! {
        let __run = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> #rt::Result<#ok> { #body },
        ));
        self.__outdated_on_unwind(__run)
    }
}
