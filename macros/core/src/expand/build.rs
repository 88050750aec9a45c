//! The captured step, built as a graph straight from the lowered stage graph instead of by
//! stream capture: one node per statement (a chain within each stage, as the stream would
//! run them), and between stages exactly the reduced edges ([`Pipeline::graph_edges`]), so
//! the graph has no edge the data does not need. `call` statements are still captured from
//! their stage's stream, into the graph being built; `while`/`if` become conditional nodes
//! whose bodies are built the same way. Fault tracking becomes memory-operation nodes: one
//! root that resets the progress words, and after each stage a mark chained after the
//! previous mark of its stream.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::bounds::{self, launch_sites};
use super::control;
use super::launch::{Retype, launch_parts};
use super::names::{Names, rt, rt_fn};
use super::step::{bindings, call_tokens, retyped_mut};
use crate::lower::{
    Control, ControlCondition, Pipeline, Stage, StageId, Statement, StatementKind, WaitCondition,
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

/// `GRAPH_EDGES`: the edges between stages of the built graph.
pub fn constants(pipeline: &Pipeline<'_>) -> TokenStream {
    if captured_not_built(pipeline) {
        // Such a step is captured, not built: its edges are the capture's.
        return quote!();
    }
    let count = pipeline.graph_edges().len();
    quote! {
        /// Edges between the stages of the step's graph ([`capture`](Self::capture) builds
        /// it straight from the stage graph): stream order and the cross-stream waits,
        /// transitively reduced. With fault tracking off and one node per stage, the graph
        /// has exactly this many edges.
        pub const GRAPH_EDGES: usize = #count;
    }
}

/// `__capture`: prepares the scratch buffers, builds the step's graph and instantiates it,
/// with the kernel nodes of its top-level launches in enqueue order (what the setters use).
pub fn capture_step_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    if captured_not_built(pipeline) {
        return captured_step_fn(names);
    }
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let name = pipeline.name.as_str();
    let stream_count = pipeline.streams.len();
    let stream_fields: Vec<Ident> = (0..stream_count).map(|i| names.stream_field(i)).collect();
    let scratch_fields: Vec<Ident> = pipeline
        .buffers
        .iter()
        .filter(|b| b.scratch)
        .map(|b| names.scratch_field(b.ident))
        .collect();
    let control_fields = control::destructured(pipeline);
    let bind = bindings(pipeline, names, &quote!(__p));
    let edges = pipeline.graph_edges();
    let sinks = |stage: StageId| format_ident!("__sinks_{}", stage.0);
    let stages = pipeline.order.iter().enumerate().map(|(index, &stage_id)| {
        let stage = &pipeline.stages[stage_id.0];
        let stage_name = stage.name.as_str();
        let stream = &stream_fields[stage.stream.0];
        let stream_index = stage.stream.0;
        let position = index as u32 + 1;
        let own = sinks(stage_id);
        let before: Vec<Ident> = edges
            .iter()
            .filter(|(_, to)| *to == stage_id)
            .map(|(from, _)| sinks(*from))
            .collect();
        let deps = if before.is_empty() {
            quote!(::std::vec::Vec::new())
        } else {
            quote!([#(&#before[..]),*].concat())
        };
        // A run of communication statements is one NCCL group, captured into the graph.
        let statements: Vec<TokenStream> = super::collective::stage_statements(
            pipeline,
            stage,
            |index, _| statement_node(pipeline, stage, &stage.statements[index], Target::Graph),
            |group| captured_into_graph(&group),
        );
        let empty = statements
            .is_empty()
            .then(|| quote!(__tail = ::std::vec![__graph.add_empty_node(&__deps)?];));
        quote! {
            let #own: ::std::vec::Vec<#rt::GraphNode> = {
                let __deps: ::std::vec::Vec<#rt::GraphNode> = #deps;
                let __stream: &#rt::Stream = #stream;
                let __result: #rt::Result<::std::vec::Vec<#rt::GraphNode>> = (|| -> #rt::Result<::std::vec::Vec<#rt::GraphNode>> {
                    let mut __tail: ::std::vec::Vec<#rt::GraphNode> = __deps.clone();
                    #empty
                    #(#statements)*
                    ::core::result::Result::Ok(__tail)
                })();
                __result.map_err(|e| #rt::stage_error(#name, #stage_name, e))?
            };
            if let ::core::option::Option::Some(__op) = __progress.mark_op(#stream_index, #position) {
                let mut __mark_deps = #own.clone();
                if let ::core::option::Option::Some(__previous) = __marks[#stream_index].or(__reset) {
                    __mark_deps.push(__previous);
                }
                __marks[#stream_index] =
                    ::core::option::Option::Some(__graph.add_mem_op_node(&__mark_deps, &[__op])?);
            }
        }
    });
    let stages: Vec<TokenStream> = stages.collect();
    // Every bounded launch is checked before any node is added, as for an eager step: a
    // refused step builds nothing.
    let refused = quote!(return ::core::result::Result::Err(__refusal););
    let checks: Vec<TokenStream> = launch_sites(pipeline)
        .iter()
        .filter(|site| bounds::bounded(pipeline, site.kernel))
        .map(|site| bounds::check_first(pipeline, site, &refused))
        .collect();
    quote! {
        /// Prepares the scratch buffers, builds one step as a graph straight from the stage
        /// graph and instantiates it, with its kernel nodes in launch order.
        #[allow(unused_variables, unused_mut, unused_assignments, unused_braces, clippy::all)]
        fn __capture(
            &mut self,
            __p: &mut #params_ty,
        ) -> #rt::Result<(#rt::Graph, #rt::GraphExec, ::std::vec::Vec<#rt::KernelNode>)> {
            self.__prepare(__p)?;
            let Self { __ctx, __kernels, __progress, #(#stream_fields,)* #(#scratch_fields,)* #control_fields .. } = self;
            #bind
            #(#checks)*
            let mut __graph = #rt::Graph::new(__ctx)?;
            let mut __nodes: ::std::vec::Vec<#rt::KernelNode> = ::std::vec::Vec::new();
            let __reset_ops = __progress.reset_ops();
            let __reset: ::core::option::Option<#rt::GraphNode> = if __reset_ops.is_empty() {
                ::core::option::Option::None
            } else {
                ::core::option::Option::Some(__graph.add_mem_op_node(&[], &__reset_ops)?)
            };
            let mut __marks: [::core::option::Option<#rt::GraphNode>; #stream_count] =
                [::core::option::Option::None; #stream_count];
            #(#stages)*
            let __exec = __graph.instantiate()?;
            ::core::result::Result::Ok((__graph, __exec, __nodes))
        }
    }
}

/// The node(s) of one statement, after `__tail`, which then holds the nodes it ends with.
fn statement_node(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    statement: &Statement<'_>,
    target: Target,
) -> TokenStream {
    let rt = rt();
    let recv = target.receiver();
    let sink = target.sink();
    let buffer = |id: &crate::lower::BufferId| pipeline.buffers[id.0].ident;
    match &statement.kind {
        StatementKind::Launch {
            source,
            kernel,
            args,
        } => {
            let device = pipeline.streams[stage.stream.0].device;
            let field = format_ident!("{}", super::names::kernel_field_name(*kernel, device));
            let (config, args) =
                launch_parts(pipeline, source, *kernel, args, Retype::Assert, None);
            // Only top-level launches are nodes the setters update in place.
            let push = (target == Target::Graph).then(|| quote!(__nodes.push(__node);));
            quote! {
                let __node = #recv.add_kernel_node(&__tail, &__kernels.#field, #config, #args)?;
                __tail = ::std::vec![__node.node()];
                #push
            }
        }
        StatementKind::Copy { source, src, dst } => {
            let dst_tokens = retyped_mut(pipeline, *dst, pipeline.buffers[src.0].elem, &source.dst);
            let src = buffer(src);
            quote!(__tail = ::std::vec![#rt::copy_node(#sink, &__tail, &*#src, #dst_tokens)?];)
        }
        StatementKind::Fill { source, dst } => {
            let dst = buffer(dst);
            let value = &source.value;
            let fill_value = rt_fn(source.keyword.span, "fill_value");
            quote! {
                let __value = #fill_value(&*#dst, #value);
                __tail = ::std::vec![#rt::fill_node(#sink, &__tail, &mut *#dst, __value)?];
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
        StatementKind::Host { source } => {
            let closure = &source.closure;
            quote_spanned!(closure.span()=> __tail = ::std::vec![#rt::host_node(&mut __graph, &__tail, #closure)?];)
        }
        StatementKind::Call { source, args } => {
            captured_into_graph(&call_tokens(pipeline, stage, source, args))
        }
        StatementKind::Control(control) => control_node(pipeline, stage, control, target),
        // Grouped with their neighbours by `collective::stage_statements`; `check` keeps them
        // out of `while`/`if` bodies.
        StatementKind::Comm { .. } => quote!(),
    }
}

/// Work that enqueues on `__stream`, captured into the graph being built after `__tail`
/// (`call` statements and communication groups).
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

/// A `while` or `if` node with its body.
fn control_node(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    control: &Control<'_>,
    target: Target,
) -> TokenStream {
    let rt = rt();
    let recv = target.receiver();
    let label = control::label(control);
    let condition = match control.condition {
        ControlCondition::Device { value, comparison } => {
            let name = pipeline.buffers[value.0].ident;
            let comparison = control::comparison(comparison);
            let threshold = control::threshold(pipeline, control);
            quote!(#rt::Condition::compare(&*#name, #comparison, #threshold).named(#label))
        }
        ControlCondition::Step => {
            let (modulus, remainder) = control::step_parts(control);
            quote!(#rt::Condition::every(&*__step_word, #modulus, #remainder).named(#label))
        }
    };
    let body: Vec<TokenStream> = control
        .body
        .iter()
        .map(|statement| statement_node(pipeline, stage, statement, Target::Body))
        .collect();
    let body = quote! {
        |__body: &mut #rt::GraphBody<'_>| -> #rt::Result<()> {
            let mut __tail: ::std::vec::Vec<#rt::GraphNode> = ::std::vec::Vec::new();
            #(#body)*
            let _ = __tail;
            ::core::result::Result::Ok(())
        }
    };
    if control.is_while() {
        let max = control::maximum(control);
        quote! {
            let __condition = #condition;
            let __loop = #recv.add_while_node(&__tail, __condition, #max, #body)?;
            __tail = ::std::vec![__loop.node()];
        }
    } else {
        quote! {
            let __condition = #condition;
            __tail = ::std::vec![#recv.add_if_node(&__tail, __condition, #body)?];
        }
    }
}

/// Whether the step is captured from its streams rather than built node by node: over
/// several devices (one graph then holds nodes of several contexts, which stream capture
/// records across devices through the step's events), or with communication (NCCL orders a
/// communicator's operations through its own streams and events, which must all belong to
/// one capture sequence: groups captured into the graph one by one failed on a GPU with
/// "dependency created on uncaptured work in another stream").
fn captured_not_built(pipeline: &Pipeline<'_>) -> bool {
    super::device::is_multi(pipeline)
        || pipeline
            .stages
            .iter()
            .flat_map(|stage| &stage.statements)
            .any(|statement| matches!(statement.kind, StatementKind::Comm { .. }))
}

/// `__capture` of a step that is captured, not built (see [`captured_not_built`]).
fn captured_step_fn(names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    quote! {
        /// Prepares the scratch buffers, records one step from the origin stream and
        /// instantiates it, with its kernel nodes in launch order.
        fn __capture(
            &mut self,
            params: &mut #params_ty,
        ) -> #rt::Result<(#rt::Graph, #rt::GraphExec, ::std::vec::Vec<#rt::KernelNode>)> {
            self.__prepare(params)?;
            self.__origin().begin_capture(#rt::CaptureMode::ThreadLocal)?;
            let enqueued = self.__enqueue(params, ::core::option::Option::None);
            // The capture always ends, also when enqueueing failed.
            let graph = self.__origin().end_capture();
            enqueued?;
            let graph = graph?;
            let exec = graph.instantiate()?;
            let nodes = #rt::kernel_nodes_in_launch_order(&graph)?;
            ::core::result::Result::Ok((graph, exec, nodes))
        }
    }
}
