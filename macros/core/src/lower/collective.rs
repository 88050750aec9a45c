//! Communication statements, lowered: each touches its operands (read or written) and
//! writes the communicator, so every communication stage is ordered after the previous one
//! in program order. On every rank the same operations then reach the communicator in the
//! same order, whichever streams the stages run on; NCCL requires that order, and two of its
//! operations never run at once on one communicator.

use proc_macro2::TokenStream;
use quote::ToTokens;

use super::{BufferId, Mode, StatementKind, Touch, Unresolved, buffer};
use crate::ast;
use crate::scope::Scope;

/// The statement, resolved: its communicator, and every operand checked to name a buffer.
pub fn lower<'a>(scope: &Scope<'a>, comm: &'a ast::Comm) -> Result<StatementKind<'a>, Unresolved> {
    let communicator = scope
        .buffers
        .iter()
        .position(|b| b.is_communicator())
        .map(BufferId)
        .ok_or_else(|| Unresolved {
            what: format!("the communicator of `{}`", comm.word()),
            span: comm.keyword,
        })?;
    for (operand, _) in comm.operands() {
        buffer(scope, &operand.name)?;
    }
    Ok(StatementKind::Comm {
        source: comm,
        communicator,
    })
}

/// The operands in the order written, each with its range (the elements it reads or writes),
/// then the communicator, written.
pub fn accesses<'a>(
    scope: &Scope<'a>,
    comm: &'a ast::Comm,
    communicator: BufferId,
) -> Vec<Touch<'a>> {
    let mut touches: Vec<Touch<'a>> = comm
        .operands()
        .into_iter()
        .filter_map(|(operand, writes)| {
            Some(Touch {
                buffer: BufferId(scope.buffer(&operand.name)?),
                mode: if writes { Mode::Write } else { Mode::Read },
                name: &operand.name,
                subscript: scope.comm_operand_ref(operand),
            })
        })
        .collect();
    if let Some(decl) = scope.buffers.get(communicator.0) {
        touches.push(Touch {
            buffer: communicator,
            mode: Mode::Write,
            name: decl.name,
            subscript: None,
        });
    }
    touches
}

/// The tokens of the host-side expressions (ranges, peer, root), which may read scalars.
pub fn expressions(comm: &ast::Comm, tokens: &mut TokenStream) {
    for expr in comm.expressions() {
        expr.to_tokens(tokens);
    }
}
