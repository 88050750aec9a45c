//! Kernel bounds in generated code: the `Bounds` value each declared kernel carries, the
//! compile-time assertion that each bound multiplies integers, and the check of every bounded
//! launch of a step before any of it is enqueued (or any node of it built, or any kernel node
//! updated).
//!
//! The runtime checks each launch itself ([`TypedKernel::launch`], `set_kernel_params`): that
//! is what makes a launch safe. The checks here come first so that a refused step, capture,
//! setter or swap leaves nothing half done: no stage enqueued, no node added or updated, the
//! params as they were.
//!
//! A step is enqueued from a plan, whose stage instances are known only when it runs (a stage
//! inside `for` has one per iteration, a subscripted buffer is a view whose length the plan
//! resolved). So the checks walk the plan's schedule before the enqueue walks it again: for
//! each instance, each bounded launch of its stage evaluates its scalar arguments once (with
//! the loop's variable and `let`s bound) and checks them against its buffers, views of the
//! resolved ranges included. The values are kept for the launch (an `Option` for a stage
//! outside loops, which has one instance, so a fixed-shape step allocates nothing; a `Vec`
//! in schedule order for a stage inside `for`), so the check and the launch see one value.
//!
//! Launches inside `while`/`if` bodies, nested ones too, are checked in the same walk's
//! second pass before anything is enqueued ([`body_check_walk`]); they keep nothing, since a
//! body may run any number of times and each of its launches checks itself again.
//!
//! [`TypedKernel::launch`]: https://docs.rs/gpu-pipeline/latest/gpu_pipeline/struct.TypedKernel.html#method.launch

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::Ident;

use super::instance::{body_slots, ref_slots, stage_header};
use super::launch::{checked_tuple, scalar_tuple, stored};
use super::names::{rt, rt_fn};
use crate::lower::{Arg, KernelId, KernelParamKind, Pipeline, StageId, StatementKind};
use crate::{ast, lower};

/// One launch statement at the top level of a stage: the kernel node each instance of the
/// stage makes of it in a captured step.
pub struct LaunchSite<'p> {
    /// The stage it belongs to (its template: a stage inside `for` has several instances).
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
    /// Its buffer arguments' resolved references, when subscripted (see `step::ref_slots`).
    pub slots: Vec<Option<usize>>,
    /// The pairs the loops around it swap (`swap(a, b);` in a `while`/`do ... while` body),
    /// outermost first: it also runs with each of them exchanged, so its bounds are checked
    /// in every arrangement.
    pub swaps: Vec<(lower::BufferId, lower::BufferId)>,
}

/// Every top-level launch statement, stage by stage in program order.
pub fn launch_sites<'p>(pipeline: &'p Pipeline<'_>) -> Vec<LaunchSite<'p>> {
    let mut sites = Vec::new();
    for (id, stage) in pipeline.stages.iter().enumerate() {
        let slots = ref_slots(stage);
        for (statement, s) in stage.statements.iter().enumerate() {
            if let StatementKind::Launch {
                source,
                kernel,
                args,
            } = &s.kind
                // A launch between a window's signals is captured from the stream, not a
                // kernel node a setter updates; it checks its bounds as it is enqueued.
                && !crate::lower::names_window(&pipeline.buffers, args)
            {
                sites.push(LaunchSite {
                    stage: StageId(id),
                    statement,
                    kernel: *kernel,
                    source,
                    args,
                    scalars: &s.scalars,
                    device: pipeline.streams[stage.stream.0].device,
                    slots: slots[statement].clone(),
                    swaps: Vec::new(),
                });
            }
        }
    }
    sites
}

/// Every launch statement inside a `while`/`if` body (nested bodies too), stage by stage in
/// program order. Their `statement` is the position of the top-level `while`/`if` they lie
/// in; the bound checks only check them ([`Keep::No`]): a body runs its launches as many
/// times as the device decides, each launch checking itself again, but the scalars it reads
/// do not change within a step, so one check before anything is enqueued refuses the step
/// whole, as for a top-level launch (issue 21: a body's earlier statements had already run
/// when a later one was refused).
pub fn body_launch_sites<'p>(pipeline: &'p Pipeline<'_>) -> Vec<LaunchSite<'p>> {
    fn walk<'p>(
        pipeline: &'p Pipeline<'_>,
        (stage, statement): (StageId, usize),
        control: &'p lower::Control<'_>,
        slots: &[Option<usize>],
        outer: &[(lower::BufferId, lower::BufferId)],
        sites: &mut Vec<LaunchSite<'p>>,
    ) {
        let mut swaps = outer.to_vec();
        swaps.extend(control.swaps.iter().copied());
        for (inner, own) in control.statements().zip(body_slots(control, slots)) {
            match &inner.kind {
                StatementKind::Launch {
                    source,
                    kernel,
                    args,
                } => sites.push(LaunchSite {
                    stage,
                    statement,
                    kernel: *kernel,
                    source,
                    args,
                    scalars: &inner.scalars,
                    device: pipeline.streams[pipeline.stages[stage.0].stream.0].device,
                    slots: own.to_vec(),
                    swaps: swaps.clone(),
                }),
                StatementKind::Control(nested) => {
                    walk(pipeline, (stage, statement), nested, own, &swaps, sites);
                }
                _ => {}
            }
        }
    }
    let mut sites = Vec::new();
    for (id, stage) in pipeline.stages.iter().enumerate() {
        let slots = ref_slots(stage);
        for (statement, s) in stage.statements.iter().enumerate() {
            if let StatementKind::Control(control) = &s.kind {
                walk(
                    pipeline,
                    (StageId(id), statement),
                    control,
                    &slots[statement],
                    &[],
                    &mut sites,
                );
            }
        }
    }
    sites
}

/// The bound checks of every bounded launch inside a `while`/`if` body (see
/// [`body_launch_sites`]), over every instance `schedule` enqueues: [`check_walk`] with
/// [`Keep::No`], empty where no body launches a bounded kernel.
pub fn body_check_walk(
    pipeline: &Pipeline<'_>,
    plan: &TokenStream,
    schedule: &TokenStream,
    refused: &TokenStream,
) -> TokenStream {
    let sites = body_launch_sites(pipeline);
    let bounded = bounded_sites(pipeline, &sites);
    check_walk(pipeline, &bounded, plan, schedule, refused, Keep::No)
}

/// The site of launch statement `statement` of stage `stage`, if it is a bounded one.
pub fn bounded_site<'s, 'p>(
    pipeline: &Pipeline<'_>,
    sites: &'s [LaunchSite<'p>],
    stage: StageId,
    statement: usize,
) -> Option<&'s LaunchSite<'p>> {
    sites
        .iter()
        .find(|site| site.stage == stage && site.statement == statement)
        .filter(|site| bounded(pipeline, site.kernel))
}

/// Whether `kernel` declares a bound on any buffer.
pub fn bounded(pipeline: &Pipeline<'_>, kernel: KernelId) -> bool {
    pipeline.kernels[kernel.0]
        .params
        .iter()
        .any(|param| matches!(param.kind, KernelParamKind::Slice { bound: Some(_), .. }))
}

/// The launches of `sites` whose kernels declare a bound: those a step checks.
pub fn bounded_sites<'s, 'p>(
    pipeline: &Pipeline<'_>,
    sites: impl IntoIterator<Item = &'s LaunchSite<'p>>,
) -> Vec<&'s LaunchSite<'p>>
where
    'p: 's,
{
    sites
        .into_iter()
        .filter(|site| bounded(pipeline, site.kernel))
        .collect()
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

/// What the bound checks do with the values they evaluate.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Keep them for the launches that follow (an eager step, a built graph).
    ForLaunch,
    /// Only check (a setter, a swap): the nodes are updated from the params later.
    No,
}

/// The bound checks of `sites` (bounded launches) over every instance `schedule` (an
/// expression of type `&Plan`, the plan's closed or ahead schedule) enqueues, with `plan` (an
/// expression of type `&StepPlan`) holding the instances. In scope: the bindings, `__kernels`.
/// On a refusal the code runs `refused`, in which `__refusal` is the error with the stage
/// instance's name. With [`Keep::ForLaunch`], it declares one local per site (see
/// [`stored`]) that the launches then take their values from.
pub fn check_walk(
    pipeline: &Pipeline<'_>,
    sites: &[&LaunchSite<'_>],
    plan: &TokenStream,
    schedule: &TokenStream,
    refused: &TokenStream,
    keep: Keep,
) -> TokenStream {
    if sites.is_empty() {
        return TokenStream::new();
    }
    let rt = rt();
    let pipeline_name = pipeline.name.as_str();
    let looped = |site: &LaunchSite<'_>| pipeline.stages[site.stage.0].looped.is_some();
    let mut decls = Vec::new();
    let mut iterators = Vec::new();
    if keep == Keep::ForLaunch {
        for site in sites {
            let local = stored(site.stage, site.statement);
            if looped(site) {
                decls.push(quote!(let mut #local = ::std::vec::Vec::new();));
                iterators.push(quote!(let mut #local = #local.into_iter();));
            } else {
                decls.push(quote!(let mut #local = ::core::option::Option::None;));
            }
        }
    }
    let mut templates: Vec<StageId> = sites.iter().map(|site| site.stage).collect();
    templates.dedup();
    let arms = templates.iter().map(|&template| {
        let stage = &pipeline.stages[template.0];
        let header = stage_header(pipeline, stage);
        let t = template.0;
        let checks = sites.iter().filter(|site| site.stage == template).map(|site| {
            let values = scalar_tuple(pipeline, site.source, site.kernel, site.args);
            let checked = checked_tuple(site.args, &site.slots, pipeline);
            let field = format_ident!(
                "{}",
                super::names::kernel_field_name(site.kernel, site.device)
            );
            let local = stored(site.stage, site.statement);
            let store = match keep {
                Keep::ForLaunch if looped(site) => quote!(#local.push(__bound);),
                Keep::ForLaunch => quote!(#local = ::core::option::Option::Some(__bound);),
                Keep::No => quote!(let _ = __bound;),
            };
            let check = quote! {
                {
                    let __bound = #values;
                    let __checked: #rt::Result<()> = (|| __kernels.#field.check_bounds(&#checked))();
                    if let ::core::result::Result::Err(__refusal) = __checked {
                        let __refusal = #rt::stage_error(#pipeline_name, __instance.name, __refusal);
                        #refused
                    }
                    #store
                }
            };
            // In a body that swaps buffers, the launch also runs with them exchanged: each
            // arrangement is checked (only checked: body launches keep nothing).
            let arrangements = if keep == Keep::No {
                swap_arrangements(pipeline, &site.swaps)
            } else {
                Vec::new()
            };
            quote! {
                #check
                #( { #arrangements #check } )*
            }
        });
        quote!(#t => { #header #(#checks)* })
    });
    quote! {
        #(#decls)*
        for __planned in (#schedule).stages.iter() {
            let __instance = (#plan)
                .instances
                .get(__planned.stage.0)
                .ok_or_else(|| #rt::internal(#pipeline_name, "a planned stage is not described"))?;
            let __refs: &[#rt::Ref] = &__instance.refs;
            match __instance.template {
                #(#arms)*
                _ => {}
            }
        }
        #(#iterators)*
    }
}

/// The `let`s that rename the buffers for each arrangement the loops around a launch can
/// run it in besides the one written: every non-empty subset of `swaps` applied in order
/// (one loop: its pair exchanged; two nested loops: either pair, or both).
fn swap_arrangements(
    pipeline: &Pipeline<'_>,
    swaps: &[(lower::BufferId, lower::BufferId)],
) -> Vec<TokenStream> {
    // More loops than this around one launch check the arrangements of the innermost ones.
    const MOST: usize = 4;
    let swaps = &swaps[swaps.len().saturating_sub(MOST)..];
    (1u32..(1 << swaps.len()))
        .map(|mask| {
            let lets = swaps
                .iter()
                .enumerate()
                .filter(|(bit, _)| mask & (1 << bit) != 0)
                .map(|(_, &(a, b))| {
                    let (a, b) = (pipeline.buffers[a.0].ident, pipeline.buffers[b.0].ident);
                    quote!(let (#a, #b) = (&mut *#b, &mut *#a);)
                });
            quote!(#(#lets)*)
        })
        .collect()
}

/// In a stage's arm, the values the bound checks kept for launch `site` of this instance
/// (`__bound`).
pub fn take_kept(pipeline: &Pipeline<'_>, site: &LaunchSite<'_>) -> TokenStream {
    let rt = rt();
    let local = stored(site.stage, site.statement);
    let name = pipeline.name.as_str();
    let take = if pipeline.stages[site.stage.0].looped.is_some() {
        quote!(#local.next())
    } else {
        quote!(#local.take())
    };
    quote! {
        let __bound = #take.ok_or_else(|| #rt::internal(#name, "a launch was not checked"))?;
    }
}
