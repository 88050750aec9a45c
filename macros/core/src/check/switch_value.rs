//! Rule: a `switch` whose value the step sets to a constant before it (`fill mode = 5;`)
//! takes a value one of its cases is labelled with. A value of N or more for N cases runs no
//! case, as CUDA's SWITCH node does, so the switch would never run any of its bodies.
//!
//! Only the last write of the value before the switch is looked at, and only where it is a
//! `fill` (outside any control statement) that surely runs and covers element 0: every other
//! write (a kernel, a copy, a `call`, a conditional fill) gives a value the compiler cannot
//! see.

use super::iterations::Iterations;
use super::ordering::{Site, runs_before};
use crate::ast::{self, tokens_string};
use crate::constant;
use crate::ctxt::Ctxt;
use crate::lower::{BufferId, ControlCondition, Mode, Pipeline, StageId, StatementKind};

/// Runs the rule on every `switch` at the top level of a stage.
pub(super) fn switch_values_in_range(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    for (stage_id, stage) in pipeline.stages.iter().enumerate() {
        for (index, statement) in stage.statements.iter().enumerate() {
            let StatementKind::Control(control) = &statement.kind else {
                continue;
            };
            let (
                ControlCondition::Value { value },
                ast::Control::Switch {
                    value: name, cases, ..
                },
            ) = (control.condition, control.source)
            else {
                continue;
            };
            let site = Site {
                stage: StageId(stage_id),
                index,
            };
            let Some((fill, set)) = value_set_before(pipeline, value, site) else {
                continue;
            };
            let count = i128::try_from(cases.len()).unwrap_or(i128::MAX);
            if (0..count).contains(&set) {
                continue;
            }
            let writer = &pipeline.stages[fill.stage.0].decl.name;
            let StatementKind::Fill { source, .. } =
                &pipeline.stages[fill.stage.0].statements[fill.index].kind
            else {
                continue;
            };
            let labels = if count == 1 {
                "0".to_owned()
            } else {
                format!("0 to {}", count - 1)
            };
            cx.error_spanned_by(
                &source.value,
                format!(
                    "`fill {} = {}` in stage `{writer}` sets `{name}` to {set} for `switch {name}` in stage `{}`, whose cases are labelled {labels}: a value of {count} or more runs no case (as CUDA's SWITCH node does), so the switch would never run any of them; fill a case's label ({labels}), or add cases up to `{set} => {{ ... }}`",
                    super::ranges::reference_text(&source.dst_ref.borrow()),
                    tokens_string(&source.value),
                    stage.decl.name,
                ),
            );
        }
    }
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
    let statement = &stage.statements[last.index];
    let StatementKind::Fill { source, .. } = &statement.kind else {
        return None;
    };
    // A fill in a `for` that may run no iteration (outside the switch's own loop) may not run.
    let switch_loop = pipeline.stages[site.stage.0].looped;
    if let Some(looped) = stage.looped
        && stage.looped != switch_loop
        && Iterations::of(pipeline.loops[looped]).is_none_or(|it| it.range.is_empty())
    {
        return None;
    }
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
    if !covers_first {
        return None;
    }
    Some((last, constant::value(&source.value)?))
}
