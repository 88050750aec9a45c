//! `PGraph<'a>`: the captured step, an instantiated graph that borrows the step's params for
//! its whole life, replays with `launch`, and updates scalar params in place with typed
//! setters.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::names::{Names, rt, rt_fn};
use super::step::{Retype, bindings, launch_parts};
use crate::ast;
use crate::lower::{Arg, KernelId, Pipeline, ScalarId, StatementKind};

/// One launch statement, in enqueue order: the kernel node it became.
struct LaunchSite<'p> {
    /// Its index among the step's launches: the kernel node it became.
    index: usize,
    kernel: KernelId,
    source: &'p ast::Launch,
    args: &'p [Arg],
    /// The scalar params its arguments and dimensions read.
    scalars: &'p BTreeSet<ScalarId>,
    /// The device its stage runs on.
    device: usize,
}

fn launch_sites<'p>(pipeline: &'p Pipeline<'_>) -> Vec<LaunchSite<'p>> {
    let mut sites = Vec::new();
    for &stage_id in &pipeline.order {
        let device = super::device::stage_device(pipeline, stage_id.0);
        for statement in &pipeline.stages[stage_id.0].statements {
            if let StatementKind::Launch {
                source,
                kernel,
                args,
            } = &statement.kind
            {
                sites.push(LaunchSite {
                    index: sites.len(),
                    kernel: *kernel,
                    source,
                    args,
                    scalars: &statement.scalars,
                    device,
                });
            }
        }
    }
    sites
}

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
         in flight. Scalar params the step reads have `set_<name>` setters, applied together \
         before the next launch."
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
            /// Whether a setter changed a scalar that only a new capture can apply.
            recapture: bool,
        }
    }
}

/// `launch`, `synchronize`, the accessors and the setters.
pub fn graph_impl(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let graph = &names.graph;
    let params_ty = names.params_ty(quote!('a));
    let name_str = pipeline.name.as_str();
    let sites = launch_sites(pipeline);
    let setters = (0..pipeline.scalars.len()).map(|id| setter(pipeline, &sites, ScalarId(id)));
    let apply = apply_fn(pipeline, names, &sites);
    quote! {
        impl<'a> #graph<'a> {
            /// Enqueues one replay of the step on the pipeline's origin stream.
            /// Applies the setters called since the last launch first.
            pub fn launch(&mut self) -> #rt::Result<()> {
                self.apply_updates()?;
                // The captured step begins by resetting the progress marks itself.
                self.exec.launch(self.pipeline.__origin()).map_err(|e| #rt::step_error(#name_str, e))
            }

            /// Blocks until every launch so far has finished.
            pub fn synchronize(&self) -> #rt::Result<()> {
                self.pipeline.__wait()
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

/// How many kernel nodes the step's graph has: one per launch statement.
pub fn launch_count(pipeline: &Pipeline<'_>) -> usize {
    launch_sites(pipeline).len()
}

/// `apply_updates`: what the setters changed, applied to the executable graph in one pass
/// that touches each stale kernel node once, or a new capture when a changed scalar feeds a
/// node a replay cannot update.
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
            let (config, args) =
                launch_parts(pipeline, site.source, site.kernel, site.args, Retype::Cast);
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
        /// Applies the setters called since the last launch (which does this itself): each
        /// kernel node that reads a changed scalar is updated once, in place; when a changed
        /// scalar also feeds work a replay cannot update, the step is captured again instead,
        /// after the launches in flight. Errors name the pipeline; what failed stays pending.
        #[allow(unused_variables, clippy::all)]
        pub fn apply_updates(&mut self) -> #rt::Result<()> {
            if self.recapture {
                self.pipeline.__wait()?;
                let (graph, exec, nodes) = self.pipeline.__capture(&mut self.params)?;
                self.exec = exec;
                self.nodes = nodes;
                self._graph = graph;
                self.recapture = false;
                self.stale = [false; #launches];
                return ::core::result::Result::Ok(());
            }
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

/// `set_<scalar>`: records the value and what it makes stale, for `apply_updates` (which the
/// next launch runs). A scalar that only kernel launches read is updated in place in their
/// kernel nodes; one that anything else reads (a fill value, a flag value, a host closure, a
/// called function, a scratch length) is baked into nodes a replay cannot change, so it makes
/// the step be captured again; the setter of a scalar nothing reads is a compile error that
/// says so.
fn setter(pipeline: &Pipeline<'_>, sites: &[LaunchSite<'_>], id: ScalarId) -> TokenStream {
    let rt = rt();
    let scalar = &pipeline.scalars[id.0];
    let param = scalar.decl;
    let field = &param.name;
    let ty = &param.ty;
    let setter = format_ident!("set_{}", param.name, span = param.name.span());
    let affected: Vec<usize> = sites
        .iter()
        .filter(|s| s.scalars.contains(&id))
        .map(|s| s.index)
        .collect();
    let fixed = fixed_uses(pipeline, id);
    if !fixed.is_empty() {
        let doc = format!(
            "Sets `{}`; it also feeds {}, which a replayed graph cannot update in place, so \
             the next launch (or `apply_updates`) captures the step again, after the launches \
             in flight.",
            scalar.name,
            fixed.join(", ")
        );
        return quote! {
            #[doc = #doc]
            pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> {
                self.params.#field = #field;
                self.recapture = true;
                ::core::result::Result::Ok(())
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
    let doc = format!(
        "Sets `{}` for the following launches: the next launch (or `apply_updates`) updates \
         the {} kernel node(s) that read it in place (no re-capture, no re-instantiation), \
         each node once however many setters changed it.",
        scalar.name,
        affected.len()
    );
    quote! {
        #[doc = #doc]
        pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> {
            self.params.#field = #field;
            #(self.stale[#affected] = true;)*
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
