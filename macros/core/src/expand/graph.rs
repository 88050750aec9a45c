//! `PGraph<'a>`: the captured steps, instantiated graphs that borrow the step's params for
//! their whole life; `launch` replays one, typed setters update scalar params in place,
//! `swap_a_b` exchanges two buffer params between replays, and `window` hands out the pinned
//! buffers between replays (`PWindow`).
//!
//! The graph keeps one instantiation per kind of step and arrangement of the swapped buffers
//! (`kind << swaps | swapped`), captured when first needed: a swap then costs nothing at
//! replay time, as two hand-made graphs (one per parity) would.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::names::{Names, rt, rt_fn};
use super::pipeline::suffix;
use super::step::{Retype, bindings, launch_parts, ref_slots, stage_header, used_scalars};
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
                StatementKind::Launch { .. } => continue,
                StatementKind::Copy { .. } => "a `copy`".to_owned(),
                StatementKind::Fill { source, .. } => format!("`fill {}`", source.dst),
                StatementKind::Wait { source, .. } => format!("`wait {}`", source.flag),
                StatementKind::Write { source, .. } => format!("`write {}`", source.flag),
                StatementKind::Host { .. } => "a host closure".to_owned(),
                StatementKind::Call { source, .. } => {
                    format!("`call {}`", ast::function_name(&source.call))
                }
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

/// The graph struct.
pub fn graph_struct(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let input = pipeline.input;
    let vis = &input.vis;
    let name = &input.name;
    let graph = &names.graph;
    let params_ty = names.params_ty(quote!('a));
    let doc = format!(
        "Steps of [`{name}`] captured as graphs and instantiated: [`{graph}::launch`] replays \
         one. It borrows the step's params for its whole life; dropping it waits for the \
         launches in flight. Between launches, [`{graph}::window`] waits for them and hands \
         out the pinned buffers; scalar params the step reads have `set_<name>` setters, and \
         each `swap(a, b)` a `swap_a_b`."
    );
    quote! {
        #[doc = #doc]
        #vis struct #graph<'a> {
            pipeline: &'a mut #name,
            params: #params_ty,
            /// One per kind of step and arrangement of the swapped buffers.
            execs: ::std::vec::Vec<::core::option::Option<#rt::Captured>>,
            /// Bit `k` set: the buffers of the `k`-th `swap` are exchanged.
            swapped: usize,
        }
    }
}

/// `launch`, `synchronize`, `window`, the accessors, the setters and the swaps.
pub fn graph_impl(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let graph = &names.graph;
    let window = &names.window;
    let params_ty = names.params_ty(quote!('a));
    let name = &pipeline.input.name;
    let name_str = pipeline.name.as_str();
    let launches = pipeline.kinds.iter().enumerate().map(|(k, kind)| {
        let launch = format_ident!("launch{}", suffix(kind));
        let what = match kind.decl {
            Some(step) => format!("step `{}`", step.name),
            None => "the step".to_owned(),
        };
        let doc = format!("Enqueues one replay of {what} on the pipeline's origin stream.");
        quote! {
            #[doc = #doc]
            pub fn #launch(&mut self) -> #rt::Result<()> {
                let index = (#k << #name::__SWAPS) | self.swapped;
                let captured = self
                    .execs
                    .get(index)
                    .and_then(::core::option::Option::as_ref)
                    .ok_or_else(|| #rt::internal(#name_str, "a kind of step was not captured"))?;
                let current = match &self.pipeline.__last {
                    ::core::option::Option::Some(plan) => ::std::sync::Arc::ptr_eq(plan, &captured.plan),
                    ::core::option::Option::None => false,
                };
                if !current {
                    self.pipeline.__last = ::core::option::Option::Some(captured.plan.clone());
                }
                // The captured step begins by resetting the progress marks itself.
                captured
                    .exec
                    .launch(self.pipeline.__origin()?)
                    .map_err(|e| #rt::step_error(#name_str, e))
            }
        }
    });
    let setters = (0..pipeline.scalars.len()).map(|id| setter(pipeline, names, ScalarId(id)));
    let swaps = pipeline.swaps.iter().enumerate().map(|(k, (a, b))| {
        let (a, b) = (pipeline.buffers[a.0].ident, pipeline.buffers[b.0].ident);
        let swap = format_ident!("swap_{}_{}", a, b, span = a.span());
        let doc = format!(
            "Exchanges `{a}` and `{b}` for the following launches: the step then reads and \
             writes `{b}` where it declares `{a}`, and the other way round, as a ping-pong \
             solver swaps its grids. The first time each arrangement is needed, the step is \
             captured for it (and kept); after that a swap costs nothing. Both buffers stay \
             borrowed by the graph, so neither is freed or aliased while a launch may use it; \
             [`params`](Self::params) shows the current arrangement."
        );
        quote! {
            #[doc = #doc]
            pub fn #swap(&mut self) -> #rt::Result<()> {
                ::core::mem::swap(&mut self.params.#a, &mut self.params.#b);
                self.swapped ^= 1 << #k;
                if let ::core::result::Result::Err(e) = self.__ensure_captured() {
                    ::core::mem::swap(&mut self.params.#a, &mut self.params.#b);
                    self.swapped ^= 1 << #k;
                    return ::core::result::Result::Err(e);
                }
                ::core::result::Result::Ok(())
            }
        }
    });
    quote! {
        impl<'a> #graph<'a> {
            #(#launches)*

            /// Blocks until every launch so far has finished.
            pub fn synchronize(&self) -> #rt::Result<()> {
                self.pipeline.__wait_origin()
            }

            /// Waits for every launch so far, then hands out the graph's pinned buffers (`&mut`
            /// for those declared `&mut`, to write the next replay's input; `&` for all, to
            /// read the last replay's output) until the window's own `launch` replays the step
            /// again. While the window lives nothing can launch the graph; its slices block
            /// launches and wait for device work on their own, so nothing can touch memory a
            /// replay may still use.
            pub fn window(&mut self) -> #rt::Result<#window<'_, 'a>> {
                self.pipeline.__wait_origin()?;
                ::core::result::Result::Ok(#window { graph: self })
            }

            /// The params the graph was captured with (scalars as last set, swapped buffers as
            /// currently arranged).
            pub fn params(&self) -> &#params_ty {
                &self.params
            }

            /// The instantiated graph of the (first kind of) step in the current arrangement.
            pub fn exec(&self) -> ::core::option::Option<&#rt::GraphExec> {
                self.execs
                    .get(self.swapped)
                    .and_then(::core::option::Option::as_ref)
                    .map(|captured| &captured.exec)
            }

            /// The number of nodes in the captured graph of the (first kind of) step.
            pub fn node_count(&self) -> #rt::Result<usize> {
                match self.execs.get(self.swapped).and_then(::core::option::Option::as_ref) {
                    ::core::option::Option::Some(captured) => captured.graph.node_count(),
                    ::core::option::Option::None => ::core::result::Result::Ok(0),
                }
            }

            #(#swaps)*

            #(#setters)*

            /// Captures every kind of step in the current arrangement that is not yet.
            fn __ensure_captured(&mut self) -> #rt::Result<()> {
                for kind in 0..#name::__KINDS {
                    let index = (kind << #name::__SWAPS) | self.swapped;
                    if self.execs.get(index).is_some_and(::core::option::Option::is_none) {
                        let captured = self.pipeline.__capture(kind, &mut self.params)?;
                        self.execs[index] = ::core::option::Option::Some(captured);
                    }
                }
                ::core::result::Result::Ok(())
            }

            /// Drops every instantiation (after the launches in flight) and captures the
            /// current arrangement again.
            fn __recapture(&mut self) -> #rt::Result<()> {
                self.pipeline.__wait()?;
                for slot in &mut self.execs {
                    *slot = ::core::option::Option::None;
                }
                self.__ensure_captured()
            }
        }
    }
}

/// `set_<scalar>`. A scalar that only kernel launches read is updated in place in their kernel
/// nodes (of every instantiation); one that anything else reads (a fill value, a flag value, a
/// host closure, a called function, a scratch length, the shape of the step) is baked into
/// nodes a replay cannot change, so its setter captures the step again; the setter of a scalar
/// nothing reads is a compile error that says so.
fn setter(pipeline: &Pipeline<'_>, names: &Names, id: ScalarId) -> TokenStream {
    let rt = rt();
    let scalar = &pipeline.scalars[id.0];
    let param = scalar.decl;
    let field = &param.name;
    let ty = &param.ty;
    let setter = format_ident!("set_{}", param.name, span = param.name.span());
    let affected: usize = pipeline
        .stages
        .iter()
        .flat_map(|s| &s.statements)
        .filter(|s| matches!(s.kind, StatementKind::Launch { .. }) && s.scalars.contains(&id))
        .count();
    let fixed = fixed_uses(pipeline, id);
    if !fixed.is_empty() {
        let doc = format!(
            "Sets `{}` and captures the step again: it also feeds {}, which a replayed graph \
             cannot update in place. Waits for the launches in flight first.",
            scalar.name,
            fixed.join(", ")
        );
        return quote! {
            #[doc = #doc]
            pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> {
                self.params.#field = #field;
                self.__recapture()
            }
        };
    }
    if affected == 0 {
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
    let name_str = pipeline.name.as_str();
    let scratch_fields: Vec<Ident> = pipeline
        .buffers
        .iter()
        .filter(|b| b.scratch)
        .map(|b| names.scratch_field(b.ident))
        .collect();
    let bind = bindings(pipeline, names, &quote!(__p), &used_scalars(pipeline, true));
    let arms = pipeline.stages.iter().enumerate().filter_map(|(t, stage)| {
        let slots = ref_slots(stage);
        let launches: Vec<TokenStream> = stage
            .statements
            .iter()
            .zip(&slots)
            .filter_map(|(statement, slots)| {
                let StatementKind::Launch {
                    source,
                    kernel,
                    args,
                } = &statement.kind
                else {
                    return None;
                };
                if !statement.scalars.contains(&id) {
                    return Some(quote!(__node += 1;));
                }
                let (config, args) =
                    launch_parts(pipeline, source, *kernel, args, Retype::Cast, slots);
                let kernel = format_ident!("k{}", kernel.0);
                Some(quote! {
                    let node = __nodes
                        .get(__node)
                        .ok_or_else(|| #rt::internal(#name_str, "a launch has no kernel node"))?;
                    __exec.set_kernel_params(node, &__kernels.#kernel, #config, #args)
                        .map_err(|e| #rt::step_error(#name_str, e))?;
                    __node += 1;
                })
            })
            .collect();
        if launches.is_empty() {
            return None;
        }
        let header = stage_header(pipeline, stage);
        Some(quote!(#t => { #header #(#launches)* }))
    });
    let doc = format!(
        "Sets `{}` for the following launches, updating the {} kernel node(s) of each \
         instantiation that use it in place (no re-capture, no re-instantiation).",
        scalar.name, affected
    );
    quote! {
        #[doc = #doc]
        #[allow(unused_variables, unused_braces, clippy::all)]
        pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> {
            self.params.#field = #field;
            let Self { pipeline, params: __p, execs: __execs, .. } = self;
            let #name { __kernels, #(#scratch_fields,)* .. } = &mut **pipeline;
            #bind
            for __captured in __execs.iter_mut().flatten() {
                let #rt::Captured { exec: __exec, nodes: __nodes, plan: __plan, .. } = __captured;
                let mut __node = 0usize;
                for __planned in &__plan.closed.stages {
                    let __instance = __plan
                        .instances
                        .get(__planned.stage.0)
                        .ok_or_else(|| #rt::internal(#name_str, "a planned stage is not described"))?;
                    let __refs: &[#rt::Ref] = &__instance.refs;
                    match __instance.template {
                        #(#arms)*
                        _ => {}
                    }
                }
            }
            ::core::result::Result::Ok(())
        }
    }
}

/// Dropping the graph waits for the replays in flight, which use the borrowed params.
pub fn graph_drop(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let graph = &names.graph;
    let name_str = pipeline.name.as_str();
    quote! {
        impl ::core::ops::Drop for #graph<'_> {
            fn drop(&mut self) {
                // The params' borrow ends here: no replay may still be using them.
                if let ::core::result::Result::Err(e) = self.pipeline.__wait() {
                    #rt::log_unobserved_error(#name_str, &e);
                }
            }
        }
    }
}

/// `Debug` for the graph.
pub fn graph_debug(names: &Names) -> TokenStream {
    let graph = &names.graph;
    quote! {
        impl ::core::fmt::Debug for #graph<'_> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                let captured = self.execs.iter().flatten().count();
                f.debug_struct(::core::stringify!(#graph))
                    .field("captured", &captured)
                    .field("swapped", &self.swapped)
                    .finish_non_exhaustive()
            }
        }
    }
}

/// `PWindow<'g, 'a>`: the pinned buffers between replays.
pub fn window_items(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let input = pipeline.input;
    let vis = &input.vis;
    let graph = &names.graph;
    let window = &names.window;
    let params_ty = names.params_ty(quote!('a));
    let doc = format!(
        "The time between two replays of a [`{graph}`], from [`{graph}::window`]: the replays \
         so far are complete, and the graph's pinned buffers are the host's until the \
         window's `launch` replays the step again. Each pinned param `x` has `x()` (its \
         elements, to read) and, when declared `&mut`, `x_mut()` (to write the next replay's \
         input)."
    );
    let accessors = pipeline
        .buffers
        .iter()
        .filter(|b| !b.scratch && !b.array && b.memory == Memory::Pinned)
        .map(|b| {
            let name = b.ident;
            let elem = b.elem.map_or_else(|| quote!(_), |elem| quote!(#elem));
            let read_doc = format!("The elements of `{name}`, as the last replay left them.");
            let read = quote! {
                #[doc = #read_doc]
                pub fn #name(&self) -> #rt::Result<#rt::HostSlice<'_, #elem>> {
                    self.graph.params.#name.as_slice()
                }
            };
            if !b.mutable {
                return read;
            }
            let write = format_ident!("{}_mut", name, span = name.span());
            let write_doc = format!(
                "The elements of `{name}`, to change before the next replay (which reads what \
                 they hold when it is launched)."
            );
            quote! {
                #read
                #[doc = #write_doc]
                pub fn #write(&mut self) -> #rt::Result<#rt::HostSliceMut<'_, #elem>> {
                    self.graph.params.#name.as_mut_slice()
                }
            }
        });
    let launches = pipeline.kinds.iter().map(|kind| {
        let launch = format_ident!("launch{}", suffix(kind));
        let doc = "Ends the window and enqueues one replay (see the graph's method of the same \
                   name).";
        quote! {
            #[doc = #doc]
            pub fn #launch(self) -> #rt::Result<()> {
                self.graph.#launch()
            }
        }
    });
    quote! {
        #[doc = #doc]
        #vis struct #window<'g, 'a> {
            graph: &'g mut #graph<'a>,
        }

        impl<'g, 'a> #window<'g, 'a> {
            #(#accessors)*

            /// The graph's params.
            pub fn params(&self) -> &#params_ty {
                &self.graph.params
            }

            #(#launches)*
        }

        impl ::core::fmt::Debug for #window<'_, '_> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(::core::stringify!(#window)).finish_non_exhaustive()
            }
        }
    }
}
