//! The exchange through window params (`w: &mut Window<T>`): which launches of a step read a
//! window here and which write the neighbours' parts (`w on rank EXPR`), in the order the step
//! runs them. The macro puts a signal around each (see `macros/LANGUAGE.md`, "Windows"); these
//! rules make sure the signals pair up across the ranks, since a signal with no partner is a
//! rank waiting for ever.

use proc_macro2::Span;
use syn::spanned::Spanned;

use crate::ctxt::Ctxt;
use crate::lower::{Arg, BufferId, Pipeline, Statement, StatementKind};

/// What one launch does with one window.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    /// Reads this rank's part: waits for every neighbour's write, then tells them it read.
    Read,
    /// Writes the neighbours' parts: waits for their reads of the last write, then signals.
    Write,
}

/// One window access of a step, where the user wrote it.
struct Access {
    window: BufferId,
    op: Op,
    span: Span,
}

/// Runs the rules on every kind of step.
pub fn check(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    if !pipeline.buffers.iter().any(|b| b.window) {
        return;
    }
    let kinds = pipeline
        .stages
        .iter()
        .map(|s| s.kind)
        .max()
        .map_or(0, |k| k + 1);
    // Each window's first access in each kind of step, for `same_phase`.
    let mut firsts: Vec<(BufferId, Op, Span, usize)> = Vec::new();
    for kind in 0..kinds {
        // Windows with an error reported already: their sequence says nothing more.
        let mut reported: Vec<BufferId> = Vec::new();
        let mut accesses = Vec::new();
        // Windows a `call` or `host` statement takes, where the user wrote them.
        let mut by_hand: Vec<(BufferId, &syn::Ident)> = Vec::new();
        for stage in pipeline.stages.iter().filter(|s| s.kind == kind) {
            for statement in &stage.statements {
                if let StatementKind::Control(control) = &statement.kind {
                    let word = control.source.word();
                    nested(cx, pipeline, control.statements(), word, &mut reported);
                    continue;
                }
                if matches!(
                    statement.kind,
                    StatementKind::Call { .. } | StatementKind::Host { .. }
                ) {
                    by_hand.extend(
                        statement
                            .accesses
                            .iter()
                            .filter(|t| pipeline.buffers[t.buffer.0].window)
                            .map(|t| (t.buffer, t.name)),
                    );
                    continue;
                }
                let found = launch_accesses(cx, pipeline, statement, &mut reported);
                if stage.looped.is_some() {
                    if let Some(first) = found.first() {
                        cx.error_at(
                            first.span,
                            "a window is exchanged once per step, and a `for` runs this launch \
                             once per iteration; move it out of the `for`",
                        );
                        reported.extend(found.iter().map(|a| a.window));
                    }
                    continue;
                }
                accesses.extend(found);
            }
        }
        for (id, buffer) in pipeline.buffers.iter().enumerate() {
            if reported.contains(&BufferId(id)) {
                continue;
            }
            if accesses.iter().any(|a| a.window.0 == id) {
                signals_by_hand(cx, &buffer.name, &by_hand, BufferId(id));
            }
            let ops: Vec<&Access> = accesses.iter().filter(|a| a.window.0 == id).collect();
            if pairs_up(cx, &buffer.name, &ops)
                && let Some(first) = ops.first()
            {
                firsts.push((BufferId(id), first.op, first.span, kind));
            }
        }
    }
    same_phase(cx, pipeline, &firsts);
}

/// Rule: every kind of step that exchanges a window starts in the same phase, all reading it
/// first or all writing it first. A step that reads first ends with a write the next step's
/// first read consumes (`mark_written` stands in for it before the first step); one that
/// writes first ends with a read. So after a read-first kind, a write-first kind's write
/// waits for a read of the last write that never comes, and the other way round a read waits
/// for a write that never comes.
fn same_phase(cx: &Ctxt, pipeline: &Pipeline<'_>, firsts: &[(BufferId, Op, Span, usize)]) {
    let kind_name = |kind: usize| match pipeline.kinds.get(kind).and_then(|k| k.decl) {
        Some(step) => format!("`step {}`", step.name),
        None => "the unnamed kind of step".to_string(),
    };
    let phase = |op: Op, name: &str| match op {
        Op::Read => format!("reads {name} here first"),
        Op::Write => format!("writes {name} on the neighbours first"),
    };
    for (i, &(window, op, span, kind)) in firsts.iter().enumerate() {
        let Some(&(_, other_op, _, other_kind)) = firsts[..i]
            .iter()
            .find(|(w, o, _, _)| *w == window && *o != op)
        else {
            continue;
        };
        let name = &pipeline.buffers[window.0].name;
        cx.error_at(
            span,
            format!(
                "{} {}, but {} {}: a read-first step ends with a write for the next \
                 step's read and a write-first step with a read, so whichever runs after the \
                 other waits for ever; start every kind of step that exchanges `{name}` the same \
                 way (and call `mark_written` before the first step only if they read first)",
                kind_name(kind),
                phase(op, &format!("`{name}`")),
                kind_name(other_kind),
                phase(other_op, "it"),
            ),
        );
    }
}

/// Rule: a launch inside a `while`, `if` or `switch` uses no window. A body runs as often as
/// the device decides, and each signal needs exactly one partner on the neighbour; CUDA's
/// conditional bodies cannot hold the signals' memory operations either.
fn nested<'s, 'a: 's>(
    cx: &Ctxt,
    pipeline: &Pipeline<'a>,
    statements: impl Iterator<Item = &'s Statement<'a>>,
    word: &str,
    reported: &mut Vec<BufferId>,
) {
    for statement in statements {
        if let StatementKind::Control(control) = &statement.kind {
            nested(cx, pipeline, control.statements(), word, reported);
            continue;
        }
        let found = launch_accesses(cx, pipeline, statement, reported);
        reported.extend(found.iter().map(|a| a.window));
        if let Some(first) = found.first() {
            cx.error_at(
                first.span,
                format!(
                    "a window is exchanged once per step, and the body of a `{word}` runs as \
                     often as the device decides; move this launch out of the `{word}`"
                ),
            );
        }
    }
}

/// The window accesses of one statement (a launch's, one per window it names). Rule: one
/// launch does not read a window here and write it on the neighbours: the neighbours would
/// be writing this rank's part while the kernel reads it (their launch is the same one).
fn launch_accesses(
    cx: &Ctxt,
    pipeline: &Pipeline<'_>,
    statement: &Statement<'_>,
    reported: &mut Vec<BufferId>,
) -> Vec<Access> {
    let StatementKind::Launch { source, args, .. } = &statement.kind else {
        return Vec::new();
    };
    let mut found: Vec<Access> = Vec::new();
    for ((arg, expr), rank) in args.iter().zip(&source.args).zip(&source.ranks) {
        let Arg::Buffer { buffer, .. } = arg else {
            continue;
        };
        if !pipeline.buffers[buffer.0].window {
            continue;
        }
        let op = if rank.is_some() { Op::Write } else { Op::Read };
        let span = expr.span();
        match found.iter().find(|a| a.window == *buffer) {
            Some(other) if other.op != op && !reported.contains(buffer) => {
                reported.push(*buffer);
                let name = &pipeline.buffers[buffer.0].name;
                cx.error_at(
                    span,
                    format!(
                        "this launch reads `{name}` here and writes it on its neighbours, whose \
                         launch writes this rank's `{name}` while it is read; read `{name}` and \
                         write the neighbours' in two launches"
                    ),
                );
            }
            Some(_) => {}
            None => found.push(Access {
                window: *buffer,
                op,
                span,
            }),
        }
    }
    found
}

/// Rule: a window the step's launches exchange (the macro deriving its signals) is not also
/// given to a `call` or `host` statement of the same kind of step, whose signals by hand
/// would come between the derived ones and break their pairing across the ranks.
fn signals_by_hand(cx: &Ctxt, name: &str, by_hand: &[(BufferId, &syn::Ident)], window: BufferId) {
    for (_, at) in by_hand.iter().filter(|(b, _)| *b == window) {
        cx.error_spanned_by(
            at,
            format!(
                "`{name}` is exchanged by this step's launches, whose signals the macro derives; \
                 a `call` or `host` statement given it too would signal out of step with them: \
                 pass `{name}` to launches only in this kind of step, or move the statement to a \
                 kind of step of its own"
            ),
        );
    }
}

/// Rule: within a kind of step, the launches that write a window on the neighbours and those
/// that read it here alternate, as many of each, at least one of each. Each write waits until
/// the neighbours read the last one, and they read it only where their step reads its window
/// (the same program on every rank); each read waits for one write of every neighbour. So a
/// write with no read after it in the step leaves the next step's write waiting for ever, two
/// reads in a row wait for a write that never comes, and so on. A step may start with the
/// read (its write at the end feeds the next step's read): `Window::mark_written` stands in for
/// the write before the first step.
fn pairs_up(cx: &Ctxt, name: &str, ops: &[&Access]) -> bool {
    let (Some(first), Some(last)) = (ops.first(), ops.last()) else {
        return true;
    };
    for pair in ops.windows(2) {
        if pair[0].op == pair[1].op {
            let message = match pair[1].op {
                Op::Write => format!(
                    "`{name}` is written on the neighbours again with no launch reading \
                     `{name}` here in between: this write would wait for ever for the \
                     neighbours to read the last one, which they do where they read `{name}`; \
                     read `{name}` between the two writes"
                ),
                Op::Read => format!(
                    "`{name}` is read here again with no launch writing it on the neighbours in \
                     between: this read would wait for ever for writes the neighbours make only \
                     where they write `{name}`; write `{name} on rank EXPR` between the two reads"
                ),
            };
            cx.error_at(pair[1].span, message);
            return false;
        }
    }
    if !ops.iter().any(|a| a.op == Op::Read) {
        cx.error_at(
            first.span,
            format!(
                "the step writes `{name}` on its neighbours but no launch of the step reads \
                 `{name}` here: nothing orders the neighbours' reads of what this rank wrote \
                 (they read where this rank reads its own part), so the next step's write would \
                 wait for ever; add a launch that reads `{name}`"
            ),
        );
    } else if !ops.iter().any(|a| a.op == Op::Write) {
        cx.error_at(
            first.span,
            format!(
                "the step reads `{name}` but no launch of the step writes it on the neighbours, \
                 so the read would wait for ever for their writes; add a launch that writes \
                 `{name}[..] on rank EXPR`"
            ),
        );
    } else if first.op == last.op {
        cx.error_at(
            last.span,
            format!(
                "`{name}` is {} again at the end of the step, after the {} that pairs with \
                 its first one: every kind of step exchanges as many writes as reads, so that \
                 any step can follow any other; move this launch to another kind of step or \
                 remove it",
                if last.op == Op::Write {
                    "written on the neighbours"
                } else {
                    "read here"
                },
                if last.op == Op::Write {
                    "read"
                } else {
                    "write"
                },
            ),
        );
    } else {
        return true;
    }
    false
}
