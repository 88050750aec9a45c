//! `PGraph<'a>`: the captured step, an instantiated graph that borrows the step's params for
//! its whole life, replays with `launch`, and updates scalar params in place with typed
//! setters.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::bounds::{self, LaunchSite, launch_sites};
use super::launch::{Retype, launch_parts};
use super::names::{Names, rt, rt_fn};
use super::step::bindings;
use crate::ast;
use crate::lower::{Pipeline, ScalarId, StatementKind};

/// What a replayed graph cannot update in place that reads `scalar`, in words: "`fill x` in
/// stage `a`", "the length of scratch buffer `acc`".
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
    let launches = launch_count(pipeline);
    let doc = format!(
        "One step of [`{name}`] captured as a graph and instantiated: [`{graph}::launch`] replays \
         it. It borrows the step's params for its whole life; dropping it waits for the launches \
         in flight. Scalar params the step reads have `set_<name>` setters; those that update \
         kernel nodes in place apply together at the next launch."
    );
    quote! {
        #[doc = #doc]
        #vis struct #graph<'a> {
            pipeline: &'a mut #name,
            params: #params_ty,
            exec: #rt::GraphExec,
            nodes: ::std::vec::Vec<#rt::KernelNode>,
            _graph: #rt::Graph,
            /// Per kernel node, in launch order: whether a setter changed a scalar it reads
            /// since the node was last updated.
            stale: [bool; #launches],
        }
    }
}

/// How many kernel nodes the step's graph has: one per launch statement.
pub fn launch_count(pipeline: &Pipeline<'_>) -> usize {
    launch_sites(pipeline).len()
}

/// `launch`, `synchronize`, the accessors and the setters.
pub fn graph_impl(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let graph = &names.graph;
    let params_ty = names.params_ty(quote!('a));
    let name_str = pipeline.name.as_str();
    let sites = launch_sites(pipeline);
    let before_replay = super::control::before_replay(pipeline);
    let after_replay = super::control::after_replay(pipeline);
    let setters =
        (0..pipeline.scalars.len()).map(|id| setter(pipeline, names, &sites, ScalarId(id)));
    let apply = apply_fn(pipeline, names, &sites);
    quote! {
        impl<'a> #graph<'a> {
            /// Enqueues one replay of the step on the pipeline's origin stream, after applying
            /// the setters called since the last launch.
            pub fn launch(&mut self) -> #rt::Result<()> {
                self.apply_updates()?;
                // The step's graph begins by resetting the progress marks itself.
                let __replay = || -> #rt::Result<()> {
                    #before_replay
                    self.exec.launch(self.pipeline.__origin())
                };
                __replay().map_err(|e| #rt::step_error(#name_str, e))?;
                #after_replay
                ::core::result::Result::Ok(())
            }

            /// Blocks until every launch so far has finished. A device `while` loop that
            /// stopped at its maximum iteration count in one of them is an
            /// `Error::IterationLimit` here.
            pub fn synchronize(&self) -> #rt::Result<()> {
                self.pipeline.__wait()?;
                self.exec.check_loops().map_err(|e| #rt::step_error(#name_str, e))
            }

            /// The number of edges of the step's graph (see `GRAPH_EDGES` on the pipeline).
            pub fn edge_count(&self) -> #rt::Result<usize> {
                self._graph.edge_count()
            }

            /// The params the graph was captured with (scalars as last set).
            pub fn params(&self) -> &#params_ty {
                &self.params
            }

            /// The instantiated graph.
            pub fn exec(&self) -> &#rt::GraphExec {
                &self.exec
            }

            /// The number of nodes in the captured graph.
            pub fn node_count(&self) -> #rt::Result<usize> {
                self._graph.node_count()
            }

            #apply

            #(#setters)*
        }
    }
}

/// `apply_updates`: the in-place setters' changes, applied to the executable graph in one
/// batch that touches each stale kernel node once.
fn apply_fn(pipeline: &Pipeline<'_>, names: &Names, sites: &[LaunchSite<'_>]) -> TokenStream {
    let rt = rt();
    let name = &pipeline.input.name;
    let name_str = pipeline.name.as_str();
    let launches = sites.len();
    let scratch_fields: Vec<Ident> = pipeline
        .buffers
        .iter()
        .filter(|b| b.scratch)
        .map(|b| names.scratch_field(b.ident))
        .collect();
    let bind = bindings(pipeline, names, &quote!(__p));
    let updates = sites
        .iter()
        .filter(|site| !site.scalars.is_empty())
        .map(|site| {
            let (config, args) = launch_parts(
                pipeline,
                site.source,
                site.kernel,
                site.args,
                Retype::Cast,
                None,
            );
            let kernel = format_ident!(
                "{}",
                super::names::kernel_field_name(site.kernel, site.device)
            );
            let index = site.index;
            quote! {
                if __stale[#index] {
                    __updates.set(&__nodes[#index], &__kernels.#kernel, #config, #args)
                        .map_err(|e| #rt::step_error(#name_str, e))?;
                }
            }
        });
    quote! {
        /// Applies the in-place setters called since the last launch (which does this
        /// itself): each kernel node that reads a changed scalar is updated once, in one batch
        /// (see `GraphExec::kernel_updates`). The setters checked the kernels' bounds already;
        /// an error names the pipeline and leaves what failed pending.
        #[allow(unused_variables, clippy::all)]
        pub fn apply_updates(&mut self) -> #rt::Result<()> {
            if !self.stale.contains(&true) {
                return ::core::result::Result::Ok(());
            }
            {
                let Self { pipeline, params: __p, exec: __exec, nodes: __nodes, stale: __stale, .. } = self;
                let #name { __kernels, #(#scratch_fields,)* .. } = &mut **pipeline;
                #bind
                let mut __updates = __exec.kernel_updates().map_err(|e| #rt::step_error(#name_str, e))?;
                #(#updates)*
            }
            self.stale = [false; #launches];
            ::core::result::Result::Ok(())
        }
    }
}

/// `set_<scalar>`. A scalar that only kernel launches read is checked against the kernels'
/// bounds at once and updated in place in their kernel nodes at the next launch; one that anything else reads (a fill value, a flag value, a host closure, a called
/// function, a scratch length) is baked into nodes a replay cannot change, so its setter
/// captures the step again; the setter of a scalar nothing reads is a compile error that says
/// so.
fn setter(
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
    let launches = sites.len();
    let fixed = fixed_uses(pipeline, id);
    if !fixed.is_empty() {
        let doc = format!(
            "Sets `{}` and captures the step again: it also feeds {}, which a replayed graph \
             cannot update in place. Waits for the launches in flight first. If the new step \
             cannot be captured (a kernel's bound refuses the value, say), the graph keeps \
             its previous parameters and `{}` its previous value.",
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
            quote!(self.pipeline.__capture(&mut self.params))
        } else {
            quote! {{
                let __kept = (#(self.pipeline.#resized.take(),)*);
                let __captured = self.pipeline.__capture(&mut self.params);
                if __captured.is_err() {
                    (#(self.pipeline.#resized,)*) = __kept;
                }
                __captured
            }}
        };
        return quote! {
            #[doc = #doc]
            pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> {
                let __previous = ::core::mem::replace(&mut self.params.#field, #field);
                let __captured = match self.pipeline.__wait() {
                    ::core::result::Result::Ok(()) => #recapture,
                    ::core::result::Result::Err(e) => ::core::result::Result::Err(e),
                };
                match __captured {
                    ::core::result::Result::Ok((graph, exec, nodes)) => {
                        self.exec = exec;
                        self.nodes = nodes;
                        self._graph = graph;
                        // The new capture has every current value.
                        self.stale = [false; #launches];
                        ::core::result::Result::Ok(())
                    }
                    ::core::result::Result::Err(e) => {
                        self.params.#field = __previous;
                        ::core::result::Result::Err(e)
                    }
                }
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
    let scratch_fields: Vec<Ident> = pipeline
        .buffers
        .iter()
        .filter(|b| b.scratch)
        .map(|b| names.scratch_field(b.ident))
        .collect();
    let bind = bindings(pipeline, names, &quote!(__p));
    // The bounds of every updated node are checked before any node changes; a refusal puts
    // the previous value back.
    let refused = quote! {
        __p.#field = __previous;
        return ::core::result::Result::Err(__refusal);
    };
    let bounded = |site: &LaunchSite<'_>| bounds::feeds_bound(pipeline, site, field);
    let checks: Vec<TokenStream> = affected
        .iter()
        .filter(|site| bounded(site))
        .map(|site| bounds::check_first(pipeline, site, &refused))
        .collect();
    let stale: Vec<usize> = affected.iter().map(|site| site.index).collect();
    let bounds_doc = if checks.is_empty() {
        String::new()
    } else {
        format!(
            " A value that breaks a kernel's bound is refused before any node changes: the \
             graph keeps its previous parameters and `{}` its previous value.",
            scalar.name
        )
    };
    let doc = format!(
        "Sets `{}` for the following launches: the next launch (or `apply_updates`) updates \
         the {} kernel node(s) that read it in place (no re-capture, no re-instantiation), \
         each node once however many setters changed it.{bounds_doc}",
        scalar.name,
        affected.len()
    );
    quote! {
        #[doc = #doc]
        #[allow(unused_variables, clippy::all)]
        pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> {
            let __previous = ::core::mem::replace(&mut self.params.#field, #field);
            {
                let Self { pipeline, params: __p, .. } = &mut *self;
                let #name { __kernels, #(#scratch_fields,)* .. } = &mut **pipeline;
                #bind
                #(#checks)*
            }
            #(self.stale[#stale] = true;)*
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
                f.debug_struct(::core::stringify!(#graph)).field("exec", &self.exec).finish_non_exhaustive()
            }
        }
    }
}
