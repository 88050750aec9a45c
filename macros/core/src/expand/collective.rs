//! Communication statements: each run of consecutive `send`, `recv` and collective
//! statements of a stage becomes one group (`CommStage`) on the stage's stream, enqueued
//! with `ncclGroupStart` ... `ncclGroupEnd` on CUDA, so a halo exchange's sends and receives
//! progress together whatever their order, and one stream operation on the CPU backend.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

use super::instance::ref_slots;
use super::names::rt;
use crate::ast::{Comm, CommOp, Operand};
use crate::lower::{Pipeline, Stage, StatementKind};
use crate::symbol::REDUCE_OPS;

/// The tokens of a stage's statements in order: communication statements grouped by runs,
/// every other statement through `one`.
///
/// `wrap` turns a group's tokens (which enqueue on `__stream`) into the stage's: the identity
/// for an eager step, a capture into the graph being built for a built one.
pub fn stage_statements(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    one: impl Fn(usize, &StatementKind<'_>) -> TokenStream,
    wrap: impl Fn(TokenStream) -> TokenStream,
) -> Vec<TokenStream> {
    let mut out = Vec::new();
    let mut run: Vec<(&Comm, &[Option<usize>])> = Vec::new();
    let mut communicator = None;
    let slots = ref_slots(stage);
    for (index, statement) in stage.statements.iter().enumerate() {
        match &statement.kind {
            StatementKind::Comm {
                source,
                communicator: id,
                ..
            } => {
                communicator = Some(pipeline.buffers[id.0].ident);
                run.push((source, &slots[index]));
            }
            kind => {
                if let Some(comm) = communicator.filter(|_| !run.is_empty()) {
                    let run = std::mem::take(&mut run);
                    out.push(wrap(group(pipeline, stage, comm, &run)));
                }
                out.push(one(index, kind));
            }
        }
    }
    if let Some(comm) = communicator.filter(|_| !run.is_empty()) {
        out.push(wrap(group(pipeline, stage, comm, &run)));
    }
    out
}

/// One group: the statements recorded in order, then enqueued together; a failure names
/// the pipeline and the stage.
fn group(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    communicator: &Ident,
    run: &[(&Comm, &[Option<usize>])],
) -> TokenStream {
    let rt = rt();
    let statements = run.iter().map(|(comm, slots)| statement(comm, slots));
    let (pipeline_name, stage_name) = (&pipeline.name, &stage.name);
    quote! {
        {
            let mut __group = #rt::CommStage::new(&*#communicator, __stream)
                .in_stage(#pipeline_name, #stage_name);
            #(#statements)*
            __group.finish()?;
        }
    }
}

/// `BUF` or `BUF[RANGE]` as the buffer and range arguments of a `CommStage` method. A range
/// the step's plan resolved (`slot`, its reference among the stage instance's `__refs`) is
/// taken from there, not evaluated again: the statement touches the elements the plan ordered
/// against the other stages (a range expression may give another value a second time); one
/// the plan counts as the whole buffer (a range computed from the communicator) is evaluated
/// here.
fn operand(operand: &Operand, write: bool, slot: Option<usize>) -> (TokenStream, TokenStream) {
    let name = &operand.name;
    let buffer = if write {
        quote_spanned!(name.span()=> &mut *#name)
    } else {
        quote_spanned!(name.span()=> &*#name)
    };
    let rt = rt();
    let range = match (&operand.range, slot) {
        (Some(_), Some(slot)) => quote!({
            let __r: #rt::Ref = __refs[#slot];
            __r.start..__r.end
        }),
        (Some(range), None) => quote!(#range),
        (None, _) => quote!(..),
    };
    (buffer, range)
}

/// The runtime's `ReduceOp` for an operator the checks accepted.
fn reduce_op(op: &Ident) -> TokenStream {
    let rt = rt();
    let variant = REDUCE_OPS
        .iter()
        .find(|(name, _)| op == name)
        .map_or("Sum", |(_, variant)| variant);
    let variant = Ident::new(variant, op.span());
    quote!(#rt::ReduceOp::#variant)
}

/// One statement, as a call on `__group` spanned on its keyword; `slots` are its accesses'
/// resolved references (its operands in the order written, then the communicator).
fn statement(comm: &Comm, slots: &[Option<usize>]) -> TokenStream {
    let span: Span = comm.keyword;
    let operands = comm.operands();
    let slot_of = |operand: &Operand| {
        let at = operands
            .iter()
            .position(|(candidate, _)| std::ptr::eq(*candidate, operand))?;
        slots.get(at).copied().flatten()
    };
    let operand = |operand: &Operand, write: bool| self::operand(operand, write, slot_of(operand));
    match &comm.op {
        CommOp::Send { data, peer } => {
            let (buffer, range) = operand(data, false);
            quote_spanned!(span=> __group.send(#buffer, #range, #peer)?;)
        }
        CommOp::Recv { data, peer } => {
            let (buffer, range) = operand(data, true);
            quote_spanned!(span=> __group.recv(#buffer, #range, #peer)?;)
        }
        CommOp::AllReduce { op, src, dst } => {
            let op = reduce_op(op);
            match dst {
                Some(dst) => {
                    let (send, send_range) = operand(src, false);
                    let (recv, recv_range) = operand(dst, true);
                    quote_spanned!(span=> __group.all_reduce(#send, #send_range, #recv, #recv_range, #op)?;)
                }
                None => {
                    let (data, range) = operand(src, true);
                    quote_spanned!(span=> __group.all_reduce_in_place(#data, #range, #op)?;)
                }
            }
        }
        CommOp::Broadcast { src, dst, root } => match dst {
            Some(dst) => {
                let (send, send_range) = operand(src, false);
                let (recv, recv_range) = operand(dst, true);
                quote_spanned!(span=> __group.broadcast(#send, #send_range, #recv, #recv_range, #root)?;)
            }
            None => {
                let (data, range) = operand(src, true);
                quote_spanned!(span=> __group.broadcast_in_place(#data, #range, #root)?;)
            }
        },
        CommOp::AllGather { src, dst } => {
            let (send, send_range) = operand(src, false);
            let (recv, recv_range) = operand(dst, true);
            quote_spanned!(span=> __group.all_gather(#send, #send_range, #recv, #recv_range)?;)
        }
        CommOp::ReduceScatter { op, src, dst } => {
            let op = reduce_op(op);
            let (send, send_range) = operand(src, false);
            let (recv, recv_range) = operand(dst, true);
            quote_spanned!(span=> __group.reduce_scatter(#send, #send_range, #recv, #recv_range, #op)?;)
        }
    }
}
