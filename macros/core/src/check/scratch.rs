//! Rule: a scratch device buffer is written before a step reads it. It starts with undefined
//! contents, and a replay finds whatever the last step left. (State kept from step to step
//! belongs in a param buffer, which its owner initialises.)
//!
//! Here a write counts for the whole buffer, and a write inside a `for` whose bounds the
//! compiler cannot see counts as made (refusing it would refuse every loop over a param).
//! When the step is planned, the runtime checks the same element by element, on the stage
//! instances that run (`runtime/src/pipeline/plan/coverage.rs`).

use syn::Ident;

use super::ordering::{Site, runs_before};
use crate::ctxt::Ctxt;
use crate::lower::{BufferId, Memory, Mode, Pipeline, StageId};

/// A zero of the element type, as a `fill` of it is written (`0.0` for a float).
pub(crate) fn zero_literal(elem: Option<&syn::Type>) -> &'static str {
    let float = elem.is_some_and(|ty| {
        matches!(ty, syn::Type::Path(p) if p.path.segments.last().is_some_and(|s| ["f32", "f64"].iter().any(|f| s.ident == f)))
    });
    if float { "0.0" } else { "0" }
}

/// Where one scratch buffer is written and read in a step.
struct Uses<'p> {
    /// Statements that write it on every run of their stage.
    writes: Vec<Site>,
    /// Those that may write it (inside an `if` without `else`, a `while` or a `switch`, whose
    /// bodies may not run).
    maybe_writes: Vec<Site>,
    /// Reads that nothing earlier in their statement writes first, with the name read.
    reads: Vec<(Site, &'p Ident)>,
}

fn uses<'p>(pipeline: &'p Pipeline<'_>, id: BufferId) -> Uses<'p> {
    let mut found = Uses {
        writes: Vec::new(),
        maybe_writes: Vec::new(),
        reads: Vec::new(),
    };
    for (stage_id, stage) in pipeline.stages.iter().enumerate() {
        for (index, statement) in stage.statements.iter().enumerate() {
            let site = Site {
                stage: StageId(stage_id),
                index,
            };
            // The reads that nothing earlier in the statement writes first (a `while` body
            // may write a scratch buffer and then read it), and whether every run of the
            // statement writes it.
            let (mut uncovered, mut written) = (Vec::new(), false);
            super::flow::uncovered_reads(
                pipeline,
                std::slice::from_ref(statement),
                id,
                &mut written,
                &mut uncovered,
            );
            if written {
                found.writes.push(site);
            } else if statement.accesses.iter().any(|touch| {
                touch.buffer == id
                    && touch.mode == Mode::Write
                    && !super::flow::surely_empty(pipeline, touch)
            }) {
                found.maybe_writes.push(site);
            }
            found
                .reads
                .extend(uncovered.into_iter().map(|name| (site, name)));
        }
    }
    found
}

/// The scratch device buffers, with their ids.
fn scratch_buffers<'p, 'a>(
    pipeline: &'p Pipeline<'a>,
) -> impl Iterator<Item = (BufferId, &'p crate::lower::Buffer<'a>)> {
    pipeline
        .buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.scratch && b.memory == Memory::Device)
        .map(|(id, b)| (BufferId(id), b))
}

/// Reports the first read of each scratch buffer that no write runs before.
pub(super) fn written_first(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    for (id, buffer) in scratch_buffers(pipeline) {
        let Uses {
            writes,
            maybe_writes,
            reads,
        } = uses(pipeline, id);
        let unwritten = reads.iter().find(|(read, _)| {
            !writes
                .iter()
                .any(|&write| runs_before(pipeline, write, *read))
        });
        if let Some((read, name)) = unwritten {
            let stage = &pipeline.stages[read.stage.0].decl.name;
            let zero = zero_literal(buffer.elem);
            let maybe = maybe_writes
                .iter()
                .find(|&&write| runs_before(pipeline, write, *read));
            let message = match maybe {
                // Read through the name a loop's body swaps it with (`swap(t, u);`).
                _ if *name != buffer.name.as_str() => format!(
                    "scratch buffer `{buffer}` is read here, in stage `{stage}`, through `{name}`: the loop's body swaps the two at its end, so every other iteration reads `{buffer}` where it names `{name}`, and nothing writes `{buffer}` before that; write it before the loop (`fill {buffer} = {zero};`), or have the body write `{buffer}` (a ping-pong reads one buffer and writes the other)",
                    buffer = buffer.name,
                ),
                Some(write) => format!(
                    "scratch buffer `{name}` is read in stage `{stage}`, but the write before it, in stage `{}`, {}, so its contents may still be undefined; write it on every path: in both bodies of an `if`/`else`, in a `do ... while`, or before the conditional (`fill {name} = {zero};`)",
                    pipeline.stages[write.stage.0].decl.name,
                    why_maybe(&pipeline.stages[write.stage.0].statements[write.index]),
                ),
                None => format!(
                    "scratch buffer `{name}` is read in stage `{stage}` before anything writes it: its contents start undefined, and a later step finds what the last one left; write it first (`fill {name} = {zero};`, or a kernel that writes it) in an earlier statement or in a stage `{stage}` runs after, or make it a param if it keeps state from step to step"
                ),
            };
            cx.error_spanned_by(name, message);
        }
    }
}

/// What the writes of a scratch buffer before a read cover, as far as the compiler can tell.
enum Before {
    /// Nothing before it writes the buffer (`written_first` reports that).
    Nothing,
    /// Some write's elements are not constants, or it sits in a control statement that
    /// writes on every run: the check is left to the step's plan.
    Unknown,
    /// Constant ranges (an open end: to the buffer's end).
    Ranges(Vec<(i128, Option<i128>, String)>),
}

/// The writes of buffer `id` that run before `read`, as [`Before`] says, and the first
/// control statement among them whose writes some run skips (they count for nothing).
fn writes_before(pipeline: &Pipeline<'_>, id: BufferId, read: Site) -> (Before, Option<Site>) {
    let mut found = Before::Nothing;
    let mut skipped = None;
    for (stage_id, stage) in pipeline.stages.iter().enumerate() {
        for (index, statement) in stage.statements.iter().enumerate() {
            let site = Site {
                stage: StageId(stage_id),
                index,
            };
            let writes = statement.accesses.iter().filter(|t| {
                t.buffer == id && t.mode == Mode::Write && !super::flow::surely_empty(pipeline, t)
            });
            let mut writes = writes.peekable();
            if writes.peek().is_none() || !runs_before(pipeline, site, read) {
                continue;
            }
            if matches!(statement.kind, crate::lower::StatementKind::Control(_)) {
                // A write that some run of the statement skips (an `if` without `else`, a
                // `while`, a `switch`) covers nothing in that run; one every run makes is
                // left to the step's plan.
                let (mut written, mut reads) = (false, Vec::new());
                super::flow::uncovered_reads(
                    pipeline,
                    std::slice::from_ref(statement),
                    id,
                    &mut written,
                    &mut reads,
                );
                if written {
                    return (Before::Unknown, skipped);
                }
                skipped = skipped.or(Some(site));
                continue;
            }
            for touch in writes {
                let bounds = touch.subscript.and_then(|r| {
                    let (start, end) = super::ranges::constant_bounds(&r)?;
                    Some((start, end, super::ranges::reference_text(&r)))
                });
                let whole = touch
                    .subscript
                    .is_none_or(|r| r.range.is_none() && r.index.is_none());
                match (bounds, &mut found) {
                    // A whole write covers any read.
                    _ if whole => return (Before::Unknown, skipped),
                    (None, _) => return (Before::Unknown, skipped),
                    (Some(bounds), Before::Ranges(list)) => list.push(bounds),
                    (Some(bounds), _) => found = Before::Ranges(vec![bounds]),
                }
            }
        }
    }
    (found, skipped)
}

/// Rule: a read of constant elements of a scratch buffer (a constant range, or one open at
/// its end or the whole of a buffer of constant length) is written first where every write
/// before it names constant elements (a `recv tmp[0..4]` writes those four, as a `fill` of
/// them does). A copy reads every element of its source, and a communication statement every
/// element of its operand, so each must be written (`fill tmp[0..4]` then `copy tmp -> h` of
/// an 8-element `tmp` copies 4..8 undefined); a kernel, `call` or host closure may read only some of what it is given (a
/// kernel indexes below its bound), so at least one (`fill tmp[0..1]` then a kernel given
/// `tmp[8..16]`), as the step's plan judges. Anything the compiler cannot evaluate is left to
/// the plan, which checks element by element.
pub(super) fn constant_parts_written_first(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    for (id, buffer) in scratch_buffers(pipeline) {
        for (stage_id, stage) in pipeline.stages.iter().enumerate() {
            for (index, statement) in stage.statements.iter().enumerate() {
                if matches!(statement.kind, crate::lower::StatementKind::Control(_)) {
                    continue;
                }
                let read = Site {
                    stage: StageId(stage_id),
                    index,
                };
                // An in-place `all_reduce` or `broadcast` reads what it then writes.
                let reads = statement.accesses.iter().filter(|t| {
                    t.buffer == id && (t.mode == Mode::Read || statement.reads_in_place(t.name))
                });
                // A read open at its end, or of the whole buffer, runs to its length.
                let len = buffer.len.and_then(crate::constant::value);
                for touch in reads {
                    let (start, end, text, last) = match touch.subscript {
                        None => match len {
                            Some(len) => (0, len, buffer.name.clone(), touch.name.span()),
                            None => continue,
                        },
                        Some(reference) => {
                            let (Some((start, Some(end))), Some(range)) = (
                                super::ranges::constant_bounds(&reference)
                                    .map(|(start, end)| (start, end.or(len))),
                                reference.range,
                            ) else {
                                continue;
                            };
                            let text = super::ranges::reference_text(&reference);
                            (start, end, text, range.span)
                        }
                    };
                    let (Before::Ranges(writes), skipped) = writes_before(pipeline, id, read)
                    else {
                        continue;
                    };
                    let Some((gap_start, gap_end)) = first_gap(start, end, &writes) else {
                        continue;
                    };
                    // A copy reads every element of its source, and a communication
                    // statement every element of its operand's range; a kernel, a `call` or a
                    // host closure may read only some of what it is given (a kernel indexes
                    // below its bound), so only a read of none that was written is surely
                    // wrong.
                    let whole = matches!(
                        statement.kind,
                        crate::lower::StatementKind::Copy { .. }
                            | crate::lower::StatementKind::Comm { .. }
                    );
                    if !whole && (gap_start, gap_end) != (start, end) {
                        continue;
                    }
                    let name = &buffer.name;
                    let texts: Vec<String> = writes
                        .iter()
                        .map(|(_, _, text)| format!("`{text}`"))
                        .collect();
                    let zero = zero_literal(buffer.elem);
                    let maybe = skipped.map_or(String::new(), |write| {
                        format!(
                            " (a write of `{name}` in stage `{}` {}, so it counts for nothing)",
                            pipeline.stages[write.stage.0].decl.name,
                            why_maybe(&pipeline.stages[write.stage.0].statements[write.index]),
                        )
                    });
                    cx.error_between(
                        touch.name.span(),
                        last,
                        format!(
                            "`{}` is read in stage `{}`, but the writes of `{name}` before it ({}) cover {} elements {gap_start}..{gap_end}{maybe}, so the read finds undefined contents; write them first (`fill {name}[{gap_start}..{gap_end}] = {zero};`, or a kernel that writes them)",
                            text,
                            stage.decl.name,
                            texts.join(", "),
                            if (gap_start, gap_end) == (start, end) { "none of" } else { "only part of it, not" },
                        ),
                    );
                }
            }
        }
    }
}

/// The first run of elements of `start..end` that none of `writes` covers (a write open at
/// its end runs to the buffer's end, past any read), if there is one.
fn first_gap(
    start: i128,
    end: i128,
    writes: &[(i128, Option<i128>, String)],
) -> Option<(i128, i128)> {
    let mut at = start;
    while at < end {
        // A write that covers `at` moves it to the write's end.
        let covering = writes
            .iter()
            .filter(|(s, e, _)| *s <= at && e.is_none_or(|e| at < e))
            .map(|(_, e, _)| e.unwrap_or(end))
            .max();
        match covering {
            Some(next) => at = next.min(end),
            None => {
                // Up to the next write that starts inside the read.
                let next = writes
                    .iter()
                    .map(|(s, _, _)| *s)
                    .filter(|&s| s > at && s < end)
                    .min()
                    .unwrap_or(end);
                return Some((at, next));
            }
        }
    }
    None
}

/// Why a control statement that writes a buffer may end without writing it.
fn why_maybe(statement: &crate::lower::Statement<'_>) -> &'static str {
    let crate::lower::StatementKind::Control(control) = &statement.kind else {
        return "may not run";
    };
    match control.source {
        crate::ast::Control::While { .. } => "sits in a `while` body, which may run no time",
        crate::ast::Control::If {
            otherwise: None, ..
        } => "sits in an `if` without `else`",
        crate::ast::Control::If { .. } => "is not made by both bodies of the `if`/`else`",
        crate::ast::Control::Switch { .. } => {
            "sits in a `switch`, whose value may match no case (and then runs none)"
        }
        crate::ast::Control::DoWhile { .. } if !control.swaps.is_empty() => {
            "sits in a conditional inside the `do ... while` body, or is made there only through the other name of a `swap` (the first iteration writes each name as written, and an odd count copies the second name's buffer into the first's)"
        }
        crate::ast::Control::DoWhile { .. } => {
            "sits in a conditional inside the `do ... while` body"
        }
    }
}
