//! A launch that names a window param: the signals the exchange needs around it, on the
//! stage's stream. Before it, for each window it writes on the neighbours (`w[..] on rank r`),
//! a wait until each neighbour written into has read the last write; for each window it reads
//! here, a wait until every neighbour has written it. After it, the matching signals. Duplicate
//! ranks (both neighbours of a rank of two) are one neighbour. A built graph captures the whole
//! from the stream (`build.rs`), so the exchange replays inside the step's graph.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::launch::{Retype, arg_tokens, launch_parts};
use super::names::rt;
use crate::ast::{self, BufRef};
use crate::lower::{Arg, BufferId, KernelId, Pipeline, Stage, StatementKind};

/// Whether `source` is the first launch of its kind of step that names `window` (stages in
/// program order; `check` keeps window launches out of loops and bodies).
fn first_access(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    source: &ast::Launch,
    window: BufferId,
) -> bool {
    for other in pipeline.stages.iter().filter(|s| s.kind == stage.kind) {
        for statement in &other.statements {
            let StatementKind::Launch {
                source: s, args, ..
            } = &statement.kind
            else {
                continue;
            };
            let names = args
                .iter()
                .any(|arg| matches!(arg, Arg::Buffer { buffer, .. } if *buffer == window));
            if names {
                return std::ptr::eq(*s, source);
            }
        }
    }
    false
}

/// `(start, Some(end))` of a range as the runtime's `window_views` takes it.
fn range_tokens(reference: &BufRef<'_>) -> TokenStream {
    let (start, end) = match &reference.range {
        Some(range) => (range.start, range.end),
        None => (None, None),
    };
    let start = start.map_or_else(|| quote!(0usize), |e| quote!(((#e) as usize)));
    let end = end.map_or_else(
        || quote!(::core::option::Option::None),
        |e| quote!(::core::option::Option::Some((#e) as usize)),
    );
    quote!((#start, #end))
}

/// The launch of `source` with its window arguments as views and the signals around it.
/// `kernel_ref` is the kernel to launch, `slots` the resolved references of its other buffer
/// arguments.
pub fn launch(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    source: &ast::Launch,
    kernel: KernelId,
    args: &[Arg],
    slots: &[Option<usize>],
    kernel_ref: &TokenStream,
) -> TokenStream {
    let rt = rt();
    let label = pipeline.input.name.to_string();
    let (config, _) = launch_parts(pipeline, source, kernel, args, Retype::Assert, slots, false);
    let declared = &pipeline.kernels[kernel.0].decl.params;
    // Each window, in the order the arguments first name it: its local ranges, its remote
    // `(rank, range)`s, and the view each argument takes.
    let mut windows: Vec<BufferId> = Vec::new();
    let mut local: Vec<Vec<TokenStream>> = Vec::new();
    let mut remote: Vec<Vec<TokenStream>> = Vec::new();
    let mut ranks: Vec<Vec<TokenStream>> = Vec::new();
    let mut rank_lets = Vec::new();
    let mut tuple = Vec::new();
    let mut buffer_slots = slots.iter().copied();
    for (i, ((arg, expr), rank)) in args.iter().zip(&source.args).zip(&source.ranks).enumerate() {
        let window = match arg {
            Arg::Buffer { buffer, .. } => {
                let slot = buffer_slots.next().flatten();
                if !pipeline.buffers[buffer.0].window {
                    tuple.push(arg_tokens(
                        pipeline,
                        arg,
                        expr,
                        declared.get(i),
                        Retype::Assert,
                        slot,
                    ));
                    continue;
                }
                *buffer
            }
            Arg::Scalar { .. } => {
                tuple.push(arg_tokens(
                    pipeline,
                    arg,
                    expr,
                    declared.get(i),
                    Retype::Assert,
                    None,
                ));
                continue;
            }
        };
        let w = match windows.iter().position(|b| *b == window) {
            Some(w) => w,
            None => {
                windows.push(window);
                local.push(Vec::new());
                remote.push(Vec::new());
                ranks.push(Vec::new());
                windows.len() - 1
            }
        };
        let Some(reference) = BufRef::of_expr(expr) else {
            continue;
        };
        let range = range_tokens(&reference);
        match rank {
            Some(rank) => {
                let value = &rank.expr;
                let name = format_ident!("__rank_{}", i);
                rank_lets.push(quote!(let #name: usize = (#value) as usize;));
                let view = format_ident!("__window_{}_remote_{}", w, remote[w].len());
                remote[w].push(quote!((#name, #range)));
                ranks[w].push(quote!(#name));
                tuple.push(quote!(#view));
            }
            None => {
                let view = format_ident!("__window_{}_local_{}", w, local[w].len());
                local[w].push(range);
                tuple.push(quote!(#view));
            }
        }
    }
    let mut before = Vec::new();
    let mut views = Vec::new();
    let mut after = Vec::new();
    for (w, window) in windows.iter().enumerate() {
        let name = pipeline.buffers[window.0].ident;
        let name_str = name.to_string();
        let reads = !local[w].is_empty();
        let rank_list = &ranks[w];
        let first = first_access(pipeline, stage, source, *window);
        before.push(quote! {
            #rt::window_before(#label, #name_str, __stream, &*#name, (#reads, #first), &[#(#rank_list),*])?;
        });
        after.push(quote! {
            #rt::window_after(__stream, &*#name, #reads, &[#(#rank_list),*])?;
        });
        let local_views = (0..local[w].len()).map(|k| format_ident!("__window_{}_local_{}", w, k));
        let remote_views =
            (0..remote[w].len()).map(|k| format_ident!("__window_{}_remote_{}", w, k));
        let (l, r) = (&local[w], &remote[w]);
        views.push(quote! {
            let ([#(#local_views),*], [#(#remote_views),*]) =
                #rt::window_views(#label, #name_str, &mut *#name, [#(#l),*], [#(#r),*])?;
        });
    }
    // A buffer other than the windows named in several ranges, one written.
    let apart = super::launch::apart_lets(pipeline, &super::launch::launch_uses(args, slots));
    // The kernel's bounds are checked before the first signal, so that a refusal leaves
    // none of this launch's signals posted without the launch.
    quote! {{
        #(#rank_lets)*
        {
            #apart
            #(#views)*
            (#kernel_ref).check_bounds(&(#(#tuple,)*))?;
        }
        #(#before)*
        {
            #apart
            #(#views)*
            (#kernel_ref).launch(__stream, #config, (#(#tuple,)*))?;
        }
        #(#after)*
    }}
}

/// Every window launch of the planned step checked before anything of it is enqueued (in
/// `__enqueue`, after the bindings): the ranks it writes are the window's peers, all of them,
/// its ranges fit and the parts of one neighbour are apart, and a first read matches
/// `Window::mark_written`, so that a refusal never leaves a signal of the step posted and its
/// partner not.
pub fn prechecks(pipeline: &Pipeline<'_>) -> TokenStream {
    if !pipeline.buffers.iter().any(|b| b.window) {
        return TokenStream::new();
    }
    let rt = rt();
    let label = pipeline.input.name.to_string();
    let arms = pipeline.stages.iter().enumerate().filter_map(|(t, stage)| {
        if stage.looped.is_some() {
            return None;
        }
        let checks: Vec<TokenStream> = stage
            .statements
            .iter()
            .filter_map(|statement| match &statement.kind {
                StatementKind::Launch { source, args, .. }
                    if crate::lower::names_window(&pipeline.buffers, args) =>
                {
                    Some(launch_check(pipeline, stage, source, args))
                }
                _ => None,
            })
            .collect();
        (!checks.is_empty()).then(|| quote!(#t => { #(#checks)* }))
    });
    let arms: Vec<TokenStream> = arms.collect();
    if arms.is_empty() {
        return TokenStream::new();
    }
    quote! {
        for __planned in __schedule.stages.iter() {
            let __instance = __plan
                .instances
                .get(__planned.stage.0)
                .ok_or_else(|| #rt::internal(#label, "a planned stage is not described"))?;
            let __checked: #rt::Result<()> = (|| {
                match __instance.template {
                    #(#arms)*
                    _ => {}
                }
                ::core::result::Result::Ok(())
            })();
            if let ::core::result::Result::Err(__refusal) = __checked {
                return ::core::result::Result::Err(#rt::stage_error(#label, __instance.name, __refusal));
            }
        }
    }
}

/// The check of one launch's window arguments (see [`prechecks`]).
fn launch_check(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    source: &ast::Launch,
    args: &[Arg],
) -> TokenStream {
    let rt = rt();
    let label = pipeline.input.name.to_string();
    let mut windows: Vec<(BufferId, Vec<TokenStream>, Vec<TokenStream>)> = Vec::new();
    let mut rank_lets = Vec::new();
    for (i, ((arg, expr), rank)) in args.iter().zip(&source.args).zip(&source.ranks).enumerate() {
        let Arg::Buffer { buffer, .. } = arg else {
            continue;
        };
        if !pipeline.buffers[buffer.0].window {
            continue;
        }
        let Some(reference) = BufRef::of_expr(expr) else {
            continue;
        };
        let w = match windows.iter().position(|(b, _, _)| b == buffer) {
            Some(w) => w,
            None => {
                windows.push((*buffer, Vec::new(), Vec::new()));
                windows.len() - 1
            }
        };
        let range = range_tokens(&reference);
        match rank {
            Some(rank) => {
                let value = &rank.expr;
                let name = format_ident!("__rank_{}", i);
                rank_lets.push(quote!(let #name: usize = (#value) as usize;));
                windows[w].2.push(quote!((#name, #range)));
            }
            None => windows[w].1.push(range),
        }
    }
    let calls = windows.iter().map(|(window, local, remote)| {
        let name = pipeline.buffers[window.0].ident;
        let name_str = name.to_string();
        let reads = !local.is_empty();
        let first = first_access(pipeline, stage, source, *window);
        quote! {
            #rt::window_check(#label, #name_str, &*#name, (#reads, #first), [#(#local),*], [#(#remote),*])?;
        }
    });
    quote! {{
        #(#rank_lets)*
        #(#calls)*
    }}
}
