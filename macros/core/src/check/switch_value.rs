//! Rule: a `switch` whose value the step sets to a constant before it (`fill mode = 5;`)
//! takes a value one of its cases is labelled with. A value of N or more for N cases runs no
//! case, as CUDA's SWITCH node does, so the switch would never run any of its bodies.
//!
//! Only the last write of the value before the switch is looked at (in the step's order, or
//! in the body that holds the switch), and only where it is a `fill` (outside any control
//! statement) that surely runs and covers element 0: every other write (a kernel, a copy, a
//! `call`, a conditional fill) gives a value the compiler cannot see.

use super::iterations::Iterations;
use super::ordering::{Site, runs_before};
use crate::ast::{self, tokens_string};
use crate::constant;
use crate::ctxt::Ctxt;
use crate::lower::{BufferId, ControlCondition, Mode, Pipeline, StageId, Statement, StatementKind};

/// Runs the rule on every `switch` at the top level of a stage (against the writes the step
/// orders before it) and in a body (against the statements before it in that body).
pub(super) fn switch_values_in_range(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    for (stage_id, stage) in pipeline.stages.iter().enumerate() {
        for (index, statement) in stage.statements.iter().enumerate() {
            let Some((value, name, count)) = switch_of(statement) else {
                if let StatementKind::Control(control) = &statement.kind {
                    in_bodies(cx, &stage.decl.name, &control.bodies);
                }
                continue;
            };
            let site = Site {
                stage: StageId(stage_id),
                index,
            };
            if let Some((fill, set)) = value_set_before(pipeline, value, site) {
                let writer = &pipeline.stages[fill.stage.0];
                if let StatementKind::Fill { source, .. } = &writer.statements[fill.index].kind {
                    report(
                        cx,
                        source,
                        &writer.decl.name,
                        &stage.decl.name,
                        name,
                        count,
                        set,
                    );
                }
            }
            if let StatementKind::Control(control) = &statement.kind {
                in_bodies(cx, &stage.decl.name, &control.bodies);
            }
        }
    }
}

/// The buffer a `switch` reads, its name as written and its number of cases.
fn switch_of<'s>(statement: &'s Statement<'_>) -> Option<(BufferId, &'s syn::Ident, i128)> {
    let StatementKind::Control(control) = &statement.kind else {
        return None;
    };
    let (
        ControlCondition::Value { value },
        ast::Control::Switch {
            value: name, cases, ..
        },
    ) = (control.condition, control.source)
    else {
        return None;
    };
    Some((value, name, i128::try_from(cases.len()).ok()?))
}

/// The rule on the `switch`es of `bodies` (in `stage`), at any depth: in a body, statements
/// run in order, so the last statement before the switch that writes its value decides it.
fn in_bodies(cx: &Ctxt, stage: &syn::Ident, bodies: &[Vec<Statement<'_>>]) {
    for body in bodies {
        for (j, statement) in body.iter().enumerate() {
            if let Some((value, name, count)) = switch_of(statement) {
                let last = body[..j].iter().rev().find(|before| {
                    before
                        .accesses
                        .iter()
                        .any(|touch| touch.buffer == value && touch.mode == Mode::Write)
                });
                if let Some((source, set)) = last.and_then(|last| filled(last, value)) {
                    report(cx, source, stage, stage, name, count, set);
                }
            }
            if let StatementKind::Control(control) = &statement.kind {
                in_bodies(cx, stage, &control.bodies);
            }
        }
    }
}

/// The error, where `set` is past the labels of a switch with `count` cases.
fn report(
    cx: &Ctxt,
    source: &ast::Fill,
    writer: &syn::Ident,
    stage: &syn::Ident,
    name: &syn::Ident,
    count: i128,
    set: i128,
) {
    if (0..count).contains(&set) {
        return;
    }
    let labels = if count == 1 {
        "0".to_owned()
    } else {
        format!("0 to {}", count - 1)
    };
    cx.error_spanned_by(
        &source.value,
        format!(
            "`fill {} = {}` in stage `{writer}` sets `{name}` to {set} for `switch {name}` in stage `{stage}`, whose cases are labelled {labels}: a value of {count} or more runs no case (as CUDA's SWITCH node does), so the switch would never run any of them; fill a case's label ({labels}), or add cases up to `{set} => {{ ... }}`",
            super::ranges::reference_text(&source.dst_ref.borrow()),
            tokens_string(&source.value),
        ),
    );
}

/// The constant `statement` sets element 0 of `value` to, where it is a `fill` of a constant
/// that covers element 0.
fn filled<'s>(statement: &'s Statement<'_>, value: BufferId) -> Option<(&'s ast::Fill, i128)> {
    let StatementKind::Fill { source, .. } = &statement.kind else {
        return None;
    };
    let covers_first = statement
        .accesses
        .iter()
        .filter(|touch| touch.buffer == value && touch.mode == Mode::Write)
        .all(|touch| match touch.subscript.and_then(|r| r.range) {
            None => touch.subscript.is_none_or(|r| r.index.is_none()),
            Some(range) => {
                let start = range.start.map_or(Some(0), constant::value);
                let end = range.end.map(constant::value);
                start == Some(0) && end.is_none_or(|end| end.is_some_and(|end| end > 0))
            }
        });
    covers_first.then_some(())?;
    Some((source, constant::value(&source.value)?))
}

/// The `fill` that sets element 0 of `value` last before `site`, and the constant it sets,
/// where every run of the step makes that fill and no other write comes between.
fn value_set_before(pipeline: &Pipeline<'_>, value: BufferId, site: Site) -> Option<(Site, i128)> {
    let mut before = Vec::new();
    for (stage_id, stage) in pipeline.stages.iter().enumerate() {
        for (index, statement) in stage.statements.iter().enumerate() {
            let writes = statement
                .accesses
                .iter()
                .any(|touch| touch.buffer == value && touch.mode == Mode::Write);
            let here = Site {
                stage: StageId(stage_id),
                index,
            };
            if writes && here != site && runs_before(pipeline, here, site) {
                before.push(here);
            }
        }
    }
    // The writes of one buffer are ordered one after another: the last is the one every
    // other runs before.
    let last = *before.iter().find(|&&write| {
        before
            .iter()
            .all(|&other| other == write || runs_before(pipeline, other, write))
    })?;
    let stage = &pipeline.stages[last.stage.0];
    // A fill in a `for` that may run no iteration (outside the switch's own loop) may not run.
    let switch_loop = pipeline.stages[site.stage.0].looped;
    if let Some(looped) = stage.looped
        && stage.looped != switch_loop
        && Iterations::of(pipeline.loops[looped]).is_none_or(|it| it.range.is_empty())
    {
        return None;
    }
    let (_, set) = filled(&stage.statements[last.index], value)?;
    Some((last, set))
}
