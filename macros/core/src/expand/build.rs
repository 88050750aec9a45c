//! The captured step, built as a graph straight from its plan instead of by stream capture:
//! one node per statement (a chain within each stage instance, as the stream would run them),
//! and between instances exactly the plan's reduced edges (`StepPlan::graph_before`: stream
//! order and the waits, transitively reduced together), so the graph has no edge the data
//! does not need. A fixed-shape step's plan is the order the macro computed, so its graph has
//! `GRAPH_EDGES` edges; a step shaped at run time (loops, stream arrays, ranges) is built the
//! same way from the plan the runtime made, one node chain per stage instance.
//!
//! Ranges and elements of buffer arrays become copy, memset and kernel nodes on views of the
//! resolved references. `call` statements, communication groups and host closures that
//! receive buffers are captured from their stage's stream into the graph being built (the
//! node forms of a library call, an NCCL group or a staged host copy are the driver's);
//! `while`/`if` become conditional nodes whose bodies are built the same way. Fault tracking
//! becomes memory-operation nodes: one root that resets the progress words, and after each
//! stage instance a mark chained after the previous mark of its stream.
//!
//! A pipeline over several devices is captured from its eager enqueue instead: one graph
//! then holds nodes of several contexts, which stream capture records through the step's
//! events across devices.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::bounds::{self, Keep, LaunchSite, bounded_site, launch_sites};
use super::control;
use super::instance::{body_slots, ref_slots, stage_header};
use super::launch::{Retype, launch_parts, subscripted};
use super::names::{Names, rt, rt_fn};
use super::step::{bindings, call_tokens, copy_ends, host_clones, host_tokens, used_scalars};
use crate::lower::{
    Control, ControlCondition, Mode, Pipeline, Stage, StageId, Statement, StatementKind,
    WaitCondition,
};

/// Where a statement's node goes: the graph itself, or a conditional body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Graph,
    Body,
}

impl Target {
    /// The receiver of `add_*_node` calls.
    fn receiver(self) -> TokenStream {
        match self {
            Target::Graph => quote!(__graph),
            Target::Body => quote!(__body),
        }
    }

    /// The receiver as `&mut` for the runtime's node helpers.
    fn sink(self) -> TokenStream {
        match self {
            Target::Graph => quote!(&mut __graph),
            Target::Body => quote!(&mut *__body),
        }
    }
}

/// `GRAPH_EDGES`: the edges between stages of the built graph, for a pipeline whose shape the
/// macro knows.
pub fn constants(pipeline: &Pipeline<'_>) -> TokenStream {
    if captured_not_built(pipeline) || pipeline.dynamic {
        // Captured (its edges are the capture's), or shaped when it runs (its edges are
        // counted there: `edge_count`).
        return quote!();
    }
    let count = pipeline.graph_edges(0).len();
    let which = if pipeline.kinds.len() > 1 {
        " of the first kind of step"
    } else {
        ""
    };
    let doc = format!(
        "Edges between the stages of the step's graph{which} ([`capture`](Self::capture) \
         builds it straight from the stage graph): stream order and the cross-stream waits, \
         transitively reduced. With fault tracking off and one node per stage, the graph has \
         exactly this many edges."
    );
    quote! {
        #[doc = #doc]
        pub const GRAPH_EDGES: usize = #count;
    }
}

/// `__build(kind, params)`: prepares the scratch buffers and streams, plans one step of
/// kind `kind` and builds its graph, with the kernel nodes of its top-level launches in the
/// plan's order (what the setters use); and `__capture`, which instantiates that.
pub fn capture_step_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    if captured_not_built(pipeline) {
        return captured_step_fn(names);
    }
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let name = pipeline.name.as_str();
    let scratch_fields = names.scratch_fields(pipeline);
    let control_fields = control::destructured(pipeline);
    let bind = bindings(
        pipeline,
        names,
        &quote!(__p),
        &used_scalars(pipeline, false),
    );
    let sites = launch_sites(pipeline);
    let bounded = bounds::bounded_sites(pipeline, &sites);
    // Every bounded launch is checked before any node is added, as for an eager step: a
    // refused step builds nothing.
    let checks = bounds::check_walk(
        pipeline,
        &bounded,
        &quote!(__plan),
        &quote!(__schedule),
        &quote!(return ::core::result::Result::Err(__refusal);),
        Keep::ForLaunch,
    );
    let body_checks = bounds::body_check_walk(
        pipeline,
        &quote!(__plan),
        &quote!(__schedule),
        &quote!(return ::core::result::Result::Err(__refusal);),
    );
    let capture_by_build = capture_by_build(names);
    let prestep = control::prestep_checks(pipeline);
    let top_launches: usize = pipeline
        .stages
        .iter()
        .map(|stage| {
            stage
                .statements
                .iter()
                .filter(|statement| matches!(statement.kind, StatementKind::Launch { .. }))
                .count()
        })
        .sum();
    let arms = pipeline.stages.iter().enumerate().map(|(t, stage)| {
        let slots = ref_slots(stage);
        let header = stage_header(pipeline, stage);
        // A run of communication statements is one NCCL group, captured into the graph.
        let statements: Vec<TokenStream> = super::collective::stage_statements(
            pipeline,
            stage,
            |index, _| {
                let kept = bounded_site(pipeline, &sites, StageId(t), index);
                let handles = handle_lets(&stage.statements, index, Target::Graph, pipeline);
                let node = statement_node(
                    pipeline,
                    stage,
                    &stage.statements[index],
                    Target::Graph,
                    &slots[index],
                    kept,
                );
                quote!(#handles #node)
            },
            |group| captured_into_graph(&group),
        );
        let empty = statements
            .is_empty()
            .then(|| quote!(__tail = ::std::vec![__graph.add_empty_node(&__deps)?];));
        quote!(#t => { #header #empty #(#statements)* })
    });
    quote! {
        /// Prepares the scratch buffers and streams, plans one step of kind `kind` and builds
        /// it as a graph straight from the plan, with its kernel nodes in launch order.
        #[allow(unused_variables, unused_mut, unused_assignments, unused_braces, clippy::all)]
        fn __build(
            &mut self,
            __kind: usize,
            __p: &mut #params_ty,
        ) -> #rt::Result<#rt::Built> {
            self.__prepare(__p)?;
            let __plan = self.__plan(__kind, __p)?;
            self.__last = ::core::option::Option::Some(__plan.clone());
            let Self { __ctx, __kernels, __progress, __lanes, __scratch_epoch, #(#scratch_fields,)* #control_fields .. } = self;
            let __schedule = &__plan.closed;
            #bind
            #checks
            #body_checks
            #prestep
            let mut __graph = #rt::Graph::new(__ctx)?;
            // Sized for one instance of each stage: a chain of launches grows it no more.
            let mut __nodes: ::std::vec::Vec<#rt::KernelNode> = ::std::vec::Vec::with_capacity(#top_launches);
            let __reset_ops = __progress.reset_ops();
            let __reset: ::core::option::Option<#rt::GraphNode> = if __reset_ops.is_empty() {
                ::core::option::Option::None
            } else {
                ::core::option::Option::Some(__graph.add_mem_op_node(&[], &__reset_ops)?)
            };
            let mut __marks: ::std::vec::Vec<::core::option::Option<#rt::GraphNode>> =
                ::std::vec![::core::option::Option::None; __plan.streams];
            // The nodes each stage instance ends with, which the instances after it follow.
            let mut __sinks: ::std::vec::Vec<::std::vec::Vec<#rt::GraphNode>> =
                ::std::vec![::std::vec::Vec::new(); __plan.instances.len()];
            for (__position, __planned) in __schedule.stages.iter().enumerate() {
                let __instance = __plan
                    .instances
                    .get(__planned.stage.0)
                    .ok_or_else(|| #rt::internal(#name, "a planned stage is not described"))?;
                let __stream: &#rt::Stream = __lanes
                    .get(__instance.decl)
                    .and_then(|lanes| lanes.get(__instance.lane))
                    .ok_or_else(|| #rt::internal(#name, "a stage's stream was not created"))?;
                let __refs: &[#rt::Ref] = &__instance.refs;
                let mut __deps: ::std::vec::Vec<#rt::GraphNode> = ::std::vec::Vec::new();
                // On the CPU backend, the stage's nodes name it when they fail.
                let __scope = #rt::stage_scope(__stream, __instance.name);
                for &__before in __plan.graph_before.get(__planned.stage.0).into_iter().flatten() {
                    __deps.extend(__sinks.get(__before).into_iter().flatten().copied());
                }
                let __result: #rt::Result<::std::vec::Vec<#rt::GraphNode>> =
                    (|| -> #rt::Result<::std::vec::Vec<#rt::GraphNode>> {
                        let mut __tail: ::std::vec::Vec<#rt::GraphNode> = __deps.clone();
                        match __instance.template {
                            #(#arms)*
                            _ => return ::core::result::Result::Err(#rt::internal(#name, "an unknown stage")),
                        }
                        ::core::result::Result::Ok(__tail)
                    })();
                ::core::mem::drop(__scope);
                let __own = __result.map_err(|e| #rt::stage_error(#name, __instance.name, e))?;
                let __position = __position as u32 + 1;
                if let ::core::option::Option::Some(__op) = __progress.mark_op(__instance.stream, __position) {
                    let mut __mark_deps = __own.clone();
                    if let ::core::option::Option::Some(__previous) =
                        __marks.get(__instance.stream).copied().flatten().or(__reset)
                    {
                        __mark_deps.push(__previous);
                    }
                    let __mark = __graph.add_mem_op_node(&__mark_deps, &[__op])?;
                    if let ::core::option::Option::Some(__slot) = __marks.get_mut(__instance.stream) {
                        *__slot = ::core::option::Option::Some(__mark);
                    }
                }
                if let ::core::option::Option::Some(__slot) = __sinks.get_mut(__planned.stage.0) {
                    *__slot = __own;
                }
            }
            ::core::result::Result::Ok(#rt::Built { graph: __graph, nodes: __nodes, plan: __plan, scratch_epoch: *__scratch_epoch })
        }

        #capture_by_build
    }
}

/// The node(s) of one statement, after `__tail`, which then holds the nodes it ends with.
fn statement_node(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    statement: &Statement<'_>,
    target: Target,
    slots: &[Option<usize>],
    kept: Option<&LaunchSite<'_>>,
) -> TokenStream {
    let rt = rt();
    let sink = target.sink();
    let buffer = |id: &crate::lower::BufferId| pipeline.buffers[id.0].ident;
    match &statement.kind {
        // Between the window's signals, captured from the stream as an eager step runs it.
        StatementKind::Launch { args, .. }
            if crate::lower::names_window(&pipeline.buffers, args) =>
        {
            captured_into_graph(&super::step::statement_tokens(
                pipeline,
                stage,
                &statement.kind,
                slots,
                None,
            ))
        }
        StatementKind::Launch {
            source,
            kernel,
            args,
        } => {
            let device = pipeline.streams[stage.stream.0].device;
            let field = format_ident!("{}", super::names::kernel_field_name(*kernel, device));
            let apart =
                super::launch::apart_lets(pipeline, &super::launch::launch_uses(args, slots));
            let (config, args) = launch_parts(
                pipeline,
                source,
                *kernel,
                args,
                Retype::Assert,
                slots,
                kept.is_some(),
            );
            let take = kept.map(|site| bounds::take_kept(pipeline, site));
            // Only top-level launches are nodes the setters update in place.
            let nodes = match target {
                Target::Graph => quote!(::core::option::Option::Some(&mut __nodes)),
                Target::Body => quote!(::core::option::Option::None),
            };
            // One call, out of line: the statement's own code is its arguments (see
            // `launch_node`). The tail's vector is reused, so a chain allocates none per node.
            quote! {
                {
                    #take
                    #apart
                    #rt::launch_node(#sink, &mut __tail, #nodes, &__kernels.#field, #config, #args)?;
                }
            }
        }
        StatementKind::Copy { source, src, dst } => {
            let (src_slot, dst_slot) = (
                slots.first().copied().flatten(),
                slots.get(1).copied().flatten(),
            );
            if src_slot.is_none() && dst_slot.is_none() {
                let dst_tokens = super::step::retyped_mut(
                    pipeline,
                    *dst,
                    pipeline.buffers[src.0].elem,
                    &source.dst,
                );
                let src = buffer(src);
                return quote!(__tail = ::std::vec![#rt::copy_node(#sink, &__tail, &*#src, #dst_tokens)?];);
            }
            let apart = super::launch::apart_lets(
                pipeline,
                &[(*src, Mode::Read, src_slot), (*dst, Mode::Write, dst_slot)],
            );
            let (src, dst) = copy_ends(pipeline, *src, src_slot, *dst, dst_slot);
            let copy_node = rt_fn(source.keyword.span, "copy_node");
            quote!({
                #apart
                __tail = ::std::vec![#copy_node(#sink, &__tail, #src, #dst)?];
            })
        }
        StatementKind::Fill { source, dst } => {
            let value = &source.value;
            match slots.first().copied().flatten() {
                None => {
                    let dst = buffer(dst);
                    let fill_value = rt_fn(source.keyword.span, "fill_value");
                    quote! {
                        let __value = #fill_value(&*#dst, #value);
                        __tail = ::std::vec![#rt::fill_node(#sink, &__tail, &mut *#dst, __value)?];
                    }
                }
                Some(slot) => {
                    let dst = subscripted(pipeline, *dst, Mode::Write, Some(slot));
                    let fill_value = rt_fn(source.keyword.span, "fill_view_value");
                    quote! {
                        let mut __dst = #dst;
                        let __value = #fill_value(&__dst, #value);
                        __tail = ::std::vec![#rt::fill_node(#sink, &__tail, &mut __dst, __value)?];
                    }
                }
            }
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
            quote! {
                let __value = #flag_value(&*#flag, #value);
                __tail = ::std::vec![#rt::wait_flag_node(&mut __graph, &__tail, &*#flag, #condition, __value)?];
            }
        }
        StatementKind::Write { source, flag } => {
            let flag = buffer(flag);
            let value = &source.value;
            let flag_value = rt_fn(source.keyword.span, "flag_value");
            quote! {
                let __value = #flag_value(&*#flag, #value);
                __tail = ::std::vec![#rt::write_flag_node(&mut __graph, &__tail, &*#flag, __value)?];
            }
        }
        StatementKind::Host { source } if source.closure.inputs.is_empty() => {
            let clones = host_clones(pipeline, stage, source);
            let mut closure = source.closure.clone();
            closure.capture = Some(<syn::Token![move]>::default());
            quote_spanned! {source.closure.span()=>
                {
                    #(#clones)*
                    __tail = ::std::vec![#rt::host_node(&mut __graph, &__tail, #closure)?];
                }
            }
        }
        // A closure that receives buffers stages them through host memory the stream's
        // operations keep: captured from the stream, as an eager step enqueues it.
        StatementKind::Host { source } => {
            captured_into_graph(&host_tokens(pipeline, stage, source))
        }
        StatementKind::Call { source, args } => {
            captured_into_graph(&call_tokens(pipeline, stage, source, args))
        }
        StatementKind::Control(control) => control_node(pipeline, stage, control, target, slots),
        // Grouped with their neighbours by `collective::stage_statements`; `check` keeps them
        // out of `while`/`if` bodies.
        StatementKind::Comm { .. } => quote!(),
    }
}

/// Work that enqueues on `__stream`, captured into the graph being built after `__tail`
/// (`call` statements, communication groups, host closures that receive buffers).
fn captured_into_graph(work: &TokenStream) -> TokenStream {
    let rt = rt();
    quote! {
        let __before = __tail.clone();
        let __captured = __graph.capture_into(&__tail, __stream, |__stream: &#rt::Stream| -> #rt::Result<()> {
            #work
            ::core::result::Result::Ok(())
        })?;
        __tail = #rt::own_tail(&mut __graph, &__before, __captured)?;
    }
}

/// A `while`, `do ... while`, `if`, `if`/`else` or `switch` node with its bodies.
fn control_node(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    control: &Control<'_>,
    target: Target,
    slots: &[Option<usize>],
) -> TokenStream {
    let rt = rt();
    let recv = target.receiver();
    let label = control::label(control);
    let condition = match control.condition {
        ControlCondition::Device { value, comparison } => {
            let name = pipeline.buffers[value.0].ident;
            let comparison = control::comparison(comparison);
            let threshold = control::threshold(pipeline, control);
            quote!(#rt::Condition::compare(&*#name, #comparison, #threshold).named(#label).in_stage(__instance.name))
        }
        ControlCondition::Step => {
            let (modulus, remainder) = control::step_parts(control);
            quote!(#rt::Condition::every(&*__step_word, #modulus, #remainder).named(#label).in_stage(__instance.name))
        }
        ControlCondition::Value { value } => {
            let name = pipeline.buffers[value.0].ident;
            quote!(#rt::Condition::value(&*#name).named(#label).in_stage(__instance.name))
        }
        // `#name` is the graph's handle here (`handle_lets`).
        ControlCondition::Kernel { value } => {
            let name = pipeline.buffers[value.0].ident;
            quote!(#rt::Condition::set_by_kernel(&*#name).named(#label).in_stage(__instance.name))
        }
    };
    let mut statements = control
        .bodies
        .iter()
        .flat_map(|body| (0..body.len()).map(move |index| (body, index)))
        .zip(body_slots(control, slots))
        .map(|((body, index), slots)| {
            let handles = handle_lets(body, index, Target::Body, pipeline);
            let node = statement_node(pipeline, stage, &body[index], Target::Body, slots, None);
            quote!(#handles #node)
        });
    let bodies: Vec<TokenStream> = control
        .bodies
        .iter()
        .map(|body| {
            let nodes: Vec<TokenStream> = statements.by_ref().take(body.len()).collect();
            quote! {
                let mut __tail: ::std::vec::Vec<#rt::GraphNode> = ::std::vec::Vec::new();
                #(#nodes)*
                let _ = __tail;
                ::core::result::Result::Ok(())
            }
        })
        .collect();
    let closure =
        |body: &TokenStream| quote!(|__body: &mut #rt::GraphBody<'_>| -> #rt::Result<()> { #body });
    match control.source {
        // A body that swaps buffers: unrolled by two, the second half with the names
        // exchanged, and after an odd count each second buffer copied into the first.
        crate::ast::Control::While { .. } | crate::ast::Control::DoWhile { .. }
            if !control.swaps.is_empty() =>
        {
            let max = control::maximum(control);
            let first_test = matches!(control.source, crate::ast::Control::While { .. });
            let swapped = control::swapped_lets(pipeline, control);
            let even = &bodies[0];
            let copies = control.swaps.iter().map(|&(a, b)| {
                let (a, b) = (pipeline.buffers[a.0].ident, pipeline.buffers[b.0].ident);
                quote!(__tail = ::std::vec![#rt::copy_node(&mut *__body, &__tail, &*#b, &mut *#a)?];)
            });
            quote! {
                let __condition = #condition;
                let __loop = #recv.add_ping_pong_while_node(
                    &__tail,
                    __condition,
                    #first_test,
                    #max,
                    |__half: usize, __body: &mut #rt::GraphBody<'_>| -> #rt::Result<()> {
                        match __half {
                            0 => { #even }
                            1 => {
                                #swapped
                                #even
                            }
                            _ => {
                                let mut __tail: ::std::vec::Vec<#rt::GraphNode> = ::std::vec::Vec::new();
                                #(#copies)*
                                let _ = __tail;
                                ::core::result::Result::Ok(())
                            }
                        }
                    },
                )?;
                __tail = ::std::vec![__loop.node()];
            }
        }
        crate::ast::Control::While { .. } | crate::ast::Control::DoWhile { .. } => {
            let max = control::maximum(control);
            let body = closure(&bodies[0]);
            let add = if matches!(control.source, crate::ast::Control::DoWhile { .. }) {
                quote!(add_do_while_node)
            } else {
                quote!(add_while_node)
            };
            quote! {
                let __condition = #condition;
                let __loop = #recv.#add(&__tail, __condition, #max, #body)?;
                __tail = ::std::vec![__loop.node()];
            }
        }
        // Both bodies are built by one closure behind a `RefCell` (the runtime builds one,
        // then the other), so that both may write one buffer: two closures would each hold
        // the buffer's exclusive borrow.
        crate::ast::Control::If { .. } if bodies.len() == 2 => {
            let (then, otherwise) = (&bodies[0], &bodies[1]);
            quote! {
                let __condition = #condition;
                let __branches = ::core::cell::RefCell::new(
                    |__branch: usize, __body: &mut #rt::GraphBody<'_>| -> #rt::Result<()> {
                        if __branch == 0 { #then } else { #otherwise }
                    },
                );
                __tail = ::std::vec![#recv.add_if_else_node(
                    &__tail,
                    __condition,
                    |__body: &mut #rt::GraphBody<'_>| (__branches.borrow_mut())(0, __body),
                    |__body: &mut #rt::GraphBody<'_>| (__branches.borrow_mut())(1, __body),
                )?];
            }
        }
        crate::ast::Control::If { .. } => {
            let body = closure(&bodies[0]);
            quote! {
                let __condition = #condition;
                __tail = ::std::vec![#recv.add_if_node(&__tail, __condition, #body)?];
            }
        }
        crate::ast::Control::Switch { .. } => {
            let count = bodies.len();
            let cases = bodies
                .iter()
                .enumerate()
                .map(|(n, body)| quote!(#n => { #body }));
            quote! {
                let __condition = #condition;
                __tail = ::std::vec![#recv.add_switch_node(
                    &__tail,
                    __condition,
                    #count,
                    |__case: usize, __body: &mut #rt::GraphBody<'_>| -> #rt::Result<()> {
                        match __case {
                            #(#cases)*
                            _ => ::core::result::Result::Ok(()),
                        }
                    },
                )?];
            }
        }
    }
}

/// The handles of the conditionals of `list` that kernels set, made where the first of them
/// is mentioned at statement `index`: the launch that sets it before the conditional, or (a
/// `do ... while`) the conditional itself. The `Condition`'s name is then the graph's handle
/// (in the graph or body `target`) for the rest of the list and the conditional's bodies,
/// which is where `check` lets kernels set it.
fn handle_lets(
    list: &[Statement<'_>],
    index: usize,
    target: Target,
    pipeline: &Pipeline<'_>,
) -> TokenStream {
    let rt = rt();
    let recv = target.receiver();
    let mut lets = TokenStream::new();
    for (at, statement) in list.iter().enumerate() {
        let StatementKind::Control(control) = &statement.kind else {
            continue;
        };
        let ControlCondition::Kernel { value } = control.condition else {
            continue;
        };
        let first = list[..at]
            .iter()
            .position(|s| {
                matches!(s.kind, StatementKind::Launch { .. })
                    && s.accesses
                        .iter()
                        .any(|t| t.buffer == value && t.mode == Mode::Write)
            })
            .unwrap_or(at);
        if first != index {
            continue;
        }
        let name = pipeline.buffers[value.0].ident;
        let handle = format_ident!("__handle_{}", name);
        let max = control::maximum(control);
        let kind = match control.source {
            crate::ast::Control::While { .. } => {
                quote!(#rt::HandleKind::While { max_iterations: #max })
            }
            crate::ast::Control::DoWhile { .. } => {
                quote!(#rt::HandleKind::DoWhile { max_iterations: #max })
            }
            _ => quote!(#rt::HandleKind::Decision),
        };
        lets.extend(quote! {
            let mut #handle = #recv.condition_handle(#kind)?;
            let #name = &mut #handle;
        });
    }
    lets
}

/// Whether the step is captured from its streams rather than built node by node: over
/// several devices (one graph then holds nodes of several contexts, which stream capture
/// records across devices through the step's events), or with communication (NCCL orders a
/// communicator's operations through its own streams and events, which must all belong to
/// one capture sequence: groups captured into the graph one by one failed on a GPU with
/// "dependency created on uncaptured work in another stream").
pub(super) fn captured_not_built(pipeline: &Pipeline<'_>) -> bool {
    super::device::is_multi(pipeline)
        || pipeline
            .stages
            .iter()
            .flat_map(|stage| &stage.statements)
            .any(|statement| matches!(statement.kind, StatementKind::Comm { .. }))
}

/// `__capture(kind, params)`: `__build`, instantiated.
fn capture_by_build(names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    quote! {
        /// Builds one step of kind `kind` (see `__build`) and instantiates it.
        fn __capture(&mut self, kind: usize, params: &mut #params_ty) -> #rt::Result<#rt::Captured> {
            #rt::instantiate(self.__build(kind, params)?)
        }
    }
}

/// `__build` of a step that is captured, not built (see [`captured_not_built`]).
fn captured_step_fn(names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let capture_by_build = capture_by_build(names);
    quote! {
        /// Prepares the scratch buffers and streams, plans one step of kind `kind` and records
        /// it from the origin stream, with its kernel nodes in launch order.
        fn __build(&mut self, kind: usize, params: &mut #params_ty) -> #rt::Result<#rt::Built> {
            self.__prepare(params)?;
            let plan = self.__plan(kind, params)?;
            self.__origin()?.begin_capture(#rt::CaptureMode::ThreadLocal)?;
            let enqueued = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| {
                self.__enqueue(params, &plan, #rt::StepMode::Closed, ::core::option::Option::None)
            }));
            // The capture always ends, also when enqueueing failed or panicked (the origin
            // would stay capturing, refusing every later call).
            let graph = self.__origin().and_then(|origin| origin.end_capture());
            let enqueued = match enqueued {
                ::core::result::Result::Ok(enqueued) => enqueued,
                ::core::result::Result::Err(panic) => {
                    ::core::mem::drop(graph);
                    ::std::panic::resume_unwind(panic)
                }
            };
            enqueued?;
            let graph = graph?;
            let nodes = #rt::kernel_nodes_in_launch_order(&graph)?;
            self.__last = ::core::option::Option::Some(plan.clone());
            let scratch_epoch = self.__scratch_epoch;
            ::core::result::Result::Ok(#rt::Built { graph, nodes, plan, scratch_epoch })
        }

        #capture_by_build
    }
}
