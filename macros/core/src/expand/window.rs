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
    quote! {{
        #(#rank_lets)*
        #(#before)*
        {
            #(#views)*
            (#kernel_ref).launch(__stream, #config, (#(#tuple,)*))?;
        }
        #(#after)*
    }}
}
