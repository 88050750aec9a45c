//! Kernel bounds in generated code: the `Bounds` value each declared kernel carries, the
//! compile-time assertion that each bound multiplies integers, and the check of every bounded
//! launch of a step before any of it is enqueued (or any kernel node updated).
//!
//! The runtime checks each launch itself ([`TypedKernel::launch`], `set_kernel_params`): that
//! is what makes a launch safe. The checks here come first so that a refused step, capture or
//! setter leaves nothing half done: no stage enqueued, no node updated, the params as they
//! were. Their scalar arguments are evaluated once, into locals the launch then uses.
//!
//! [`TypedKernel::launch`]: https://docs.rs/gpu-pipeline/latest/gpu_pipeline/struct.TypedKernel.html#method.launch

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::Ident;

use super::launch::{Retype, arg_tokens, local};
use super::names::{rt, rt_fn};
use crate::lower::{Arg, KernelId, KernelParamKind, Pipeline, StageId, StatementKind};
use crate::{ast, lower};

/// One launch statement, in enqueue order: the kernel node it becomes in a captured step.
pub struct LaunchSite<'p> {
    /// Its index among the step's launches: the kernel node it became.
    pub index: usize,
    /// The stage it belongs to.
    pub stage: StageId,
    /// Its position among the stage's statements.
    pub statement: usize,
    /// The kernel.
    pub kernel: KernelId,
    /// As written.
    pub source: &'p ast::Launch,
    /// One argument per kernel parameter.
    pub args: &'p [Arg],
    /// The scalar params its arguments and dimensions read.
    pub scalars: &'p std::collections::BTreeSet<lower::ScalarId>,
    /// The device its stage runs on (which copy of the kernel it launches).
    pub device: usize,
}

/// Every launch of the step, in enqueue order.
pub fn launch_sites<'p>(pipeline: &'p Pipeline<'_>) -> Vec<LaunchSite<'p>> {
    let mut sites = Vec::new();
    for &stage in &pipeline.order {
        for (statement, s) in pipeline.stages[stage.0].statements.iter().enumerate() {
            if let StatementKind::Launch {
                source,
                kernel,
                args,
            } = &s.kind
            {
                sites.push(LaunchSite {
                    index: sites.len(),
                    stage,
                    statement,
                    kernel: *kernel,
                    source,
                    args,
                    scalars: &s.scalars,
                    device: pipeline.streams[pipeline.stages[stage.0].stream.0].device,
                });
            }
        }
    }
    sites
}

/// Whether `kernel` declares a bound on any buffer.
pub fn bounded(pipeline: &Pipeline<'_>, kernel: KernelId) -> bool {
    pipeline.kernels[kernel.0]
        .params
        .iter()
        .any(|param| matches!(param.kind, KernelParamKind::Slice { bound: Some(_), .. }))
}

/// Whether scalar param `scalar` feeds an argument that one of the bounds of `site`'s kernel
/// multiplies: whether setting it can break a bound of that launch.
pub fn feeds_bound(pipeline: &Pipeline<'_>, site: &LaunchSite<'_>, scalar: &Ident) -> bool {
    let kernel = &pipeline.kernels[site.kernel.0];
    kernel
        .params
        .iter()
        .filter_map(|param| match &param.kind {
            KernelParamKind::Slice {
                bound: Some(bound), ..
            } => Some(bound),
            _ => None,
        })
        .flat_map(|bound| bound.factors.iter().map(|(position, _)| *position))
        .filter_map(|position| site.source.args.iter().nth(position))
        .any(|arg| {
            ast::token_mentions(quote!(#arg))
                .iter()
                .any(|mention| mention.ident == *scalar)
        })
}

/// The `Bounds` value of `kernel`: its parameters' names and each bounded buffer's bound, by
/// position, as `gpu_pipeline::Bounds` reads them.
pub fn bounds_value(pipeline: &Pipeline<'_>, kernel: KernelId) -> TokenStream {
    let rt = rt();
    let kernel = &pipeline.kernels[kernel.0];
    let names = kernel.params.iter().map(|param| param.name.as_str());
    let entries = kernel
        .params
        .iter()
        .enumerate()
        .filter_map(|(position, param)| match &param.kind {
            KernelParamKind::Slice {
                bound: Some(bound), ..
            } => {
                let scale = bound.scale;
                let factors = bound.factors.iter().map(|(factor, _)| factor);
                let offset = bound.offset;
                Some(quote! {
                    .buffer(#position, #rt::Bound::constant(#scale) #(.times(#factors))* .plus(#offset))
                })
            }
            _ => None,
        });
    quote!(#rt::Bounds::new().names(&[#(#names),*]) #(#entries)*)
}

/// For each parameter a bound of `kernel` multiplies, an assertion that its declared type is
/// an integer, spanned on the name in the bound (a type the macro could not judge by its
/// spelling, such as an alias, is judged here).
pub fn integer_assertions(pipeline: &Pipeline<'_>, kernel: KernelId) -> TokenStream {
    let kernel = &pipeline.kernels[kernel.0];
    let asserts = kernel.params.iter().flat_map(|param| match &param.kind {
        KernelParamKind::Slice {
            bound: Some(bound), ..
        } => bound.factors.clone(),
        _ => Vec::new(),
    });
    asserts
        .map(|(position, ident)| {
            let function = rt_fn(ident.span(), "bound_scalar");
            // The type is re-spanned so that the compiler reports it at the name in the
            // bound, the token that asks for an integer.
            let ty = respan(
                kernel.decl.params[position].ty.to_token_stream(),
                ident.span(),
            );
            quote_spanned!(ident.span()=> #function::<#ty>();)
        })
        .collect()
}

/// `tokens` with every span set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let TokenTree::Group(group) = &tree {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                tree = TokenTree::Group(inner);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

/// For a launch of a bounded kernel: its scalar arguments evaluated into locals, then its
/// bounds checked against them and the buffers' lengths. On a refusal the code runs
/// `refused`, in which `__refusal` is the error with the stage's name.
pub fn check_first(
    pipeline: &Pipeline<'_>,
    site: &LaunchSite<'_>,
    refused: &TokenStream,
) -> TokenStream {
    let rt = rt();
    let declared = &pipeline.kernels[site.kernel.0].decl.params;
    let mut lets = Vec::new();
    let mut checked = Vec::new();
    for (i, (arg, expr)) in site.args.iter().zip(&site.source.args).enumerate() {
        match arg {
            Arg::Scalar { .. } => {
                let name = local(site.index, i);
                let value = arg_tokens(pipeline, arg, expr, declared.get(i), Retype::Cast);
                lets.push(quote!(let #name = #value;));
                checked.push(quote!(#name));
            }
            Arg::Buffer { buffer, .. } => {
                let name = pipeline.buffers[buffer.0].ident;
                checked.push(quote!(&*#name));
            }
        }
    }
    let field = format_ident!(
        "{}",
        super::names::kernel_field_name(site.kernel, site.device)
    );
    let pipeline_name = pipeline.name.as_str();
    let stage_name = pipeline.stages[site.stage.0].name.as_str();
    quote! {
        #(#lets)*
        if let ::core::result::Result::Err(__refusal) = __kernels.#field.check_bounds(&(#(#checked,)*)) {
            let __refusal = #rt::stage_error(#pipeline_name, #stage_name, __refusal);
            #refused
        }
    }
}
