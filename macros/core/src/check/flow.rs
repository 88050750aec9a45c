//! Data flow through device loops and conditionals (issue 23, class 4): what a body reads and
//! writes, in the order a device runs it.
//!
//! A `while` or `do ... while` decides on the device whether to run its body again from the
//! first element of its condition buffer; a body that never writes that element gives the same
//! answer every time, so the loop runs to its `max` and fails (or never runs). And a scratch
//! buffer a body writes before it reads it is written first, as the same statements outside
//! the loop would be: [`uncovered_reads`] is the order the scratch rule in `ordering` judges.

use syn::Ident;

use crate::ast;
use crate::ctxt::Ctxt;
use crate::lower::{BufferId, Control, ControlCondition, Mode, Pipeline, Statement, StatementKind};

/// Runs the rules on every device loop.
pub fn check(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    for stage in &pipeline.stages {
        each_control(&stage.statements, &mut |control| {
            loop_writes_its_condition(cx, pipeline, control);
        });
    }
}

/// Calls `f` on every control statement of `statements`, at any depth.
fn each_control<'s, 'a>(statements: &'s [Statement<'a>], f: &mut impl FnMut(&'s Control<'a>)) {
    for statement in statements {
        if let StatementKind::Control(control) = &statement.kind {
            f(control);
            for body in &control.bodies {
                each_control(body, f);
            }
        }
    }
}

/// Rule: the body of a `while` or `do ... while` writes the element its condition reads (the
/// first of the condition buffer). Otherwise the condition is the same at every test: the loop
/// runs its body `max` times and fails with `Error::IterationLimit`, or never runs it.
/// A write through a range the compiler cannot evaluate may reach the element, and is taken
/// to.
fn loop_writes_its_condition(cx: &Ctxt, pipeline: &Pipeline<'_>, control: &Control<'_>) {
    let (ast::Control::While { condition, .. } | ast::Control::DoWhile { condition, .. }) =
        control.source
    else {
        return;
    };
    let (ControlCondition::Device { value, .. }, ast::Condition::Device(written)) =
        (control.condition, condition)
    else {
        return;
    };
    let mut others: Vec<String> = Vec::new();
    for touch in control
        .statements()
        .flat_map(|s| s.accesses.iter())
        .filter(|touch| touch.buffer == value && touch.mode == Mode::Write)
    {
        let Some(range) = touch.subscript.and_then(|r| r.range) else {
            return;
        };
        let start = range.start.map_or(Some(0), crate::constant::value);
        let end = range.end.map(crate::constant::value);
        match (start, end) {
            (Some(start), Some(Some(end))) if start > 0 || end <= 0 => {
                others.push(format!("`{}[{start}..{end}]`", touch.name));
            }
            (Some(start), None) if start > 0 => others.push(format!("`{}[{start}..]`", touch.name)),
            _ => return,
        }
    }
    let name = &written.value;
    let test = format!(
        "`{} {} {}`",
        name,
        written.comparison.symbol(),
        crate::ast::tokens_string(&written.threshold)
    );
    let buffer = pipeline
        .buffers
        .get(value.0)
        .map_or(name.to_string(), |b| b.name.clone());
    let what = if others.is_empty() {
        format!("nothing in the loop's body writes `{buffer}`")
    } else {
        format!(
            "the loop's body writes only {}, not element 0, which the test reads",
            others.join(" and ")
        )
    };
    cx.error_spanned_by(
        name,
        format!(
            "the loop tests {test}, but {what}: the test gives the same answer every time, so the loop runs its body `max` times and fails with `Error::IterationLimit` (or never runs it); have a statement in the body write `{buffer}[0]` (the kernel that computes it, e.g. `launch k::residual(.., {buffer})`), or test a buffer the body writes"
        ),
    );
}

/// The reads of `buffer` in `statements`, in the order a device runs them, that no write
/// before them covers; `written` says whether one before `statements` did, and is left saying
/// whether one has by their end. One statement's own reads come before its writes (a kernel
/// given a buffer to read and to write reads what was there). Inside a control statement the
/// body runs in order, so a write earlier in a body covers a later read in it (a scratch
/// buffer written and then read inside a `while`); the bodies of an `if`/`else` or a `switch`
/// are alternatives, so a write in one covers no read in another. The condition of a
/// `while`, `if` or `switch` is read before its body, that of a `do ... while` after it.
/// After a control statement a write counts as done only where every run makes it: in the
/// body of a `do ... while` (it always runs), or in both bodies of an `if`/`else`; not in an
/// `if` without `else`, a `while` (its body may run no time) or a `switch` (a value past its
/// last case runs none). A loop whose body swaps the buffer with another runs the body with
/// the names exchanged every other iteration: there a read of the other name reads this buffer
/// (and is reported with that name).
pub fn uncovered_reads<'a>(
    pipeline: &Pipeline<'_>,
    statements: &[Statement<'a>],
    buffer: BufferId,
    written: &mut bool,
    out: &mut Vec<&'a Ident>,
) {
    for statement in statements {
        let StatementKind::Control(control) = &statement.kind else {
            let touches = statement
                .accesses
                .iter()
                .filter(|t| t.buffer == buffer && !surely_empty(pipeline, t));
            let mut writes = false;
            for touch in touches {
                match touch.mode {
                    Mode::Read if !*written => out.push(touch.name),
                    Mode::Read => {}
                    // An in-place `all_reduce` or `broadcast` reads what it then writes.
                    Mode::Write if !*written && statement.reads_in_place(touch.name) => {
                        out.push(touch.name);
                        writes = true;
                    }
                    Mode::Write => writes = true,
                }
            }
            *written |= writes;
            continue;
        };
        let condition = condition_read(control).filter(|(read, _)| *read == buffer);
        let after_body = matches!(control.source, ast::Control::DoWhile { .. });
        if let (Some((_, name)), false, false) = (condition, after_body, *written) {
            out.push(name);
        }
        // A loop that swaps the buffer with another (`swap(a, b);`) runs its body with the two
        // names exchanged every other iteration.
        let partner = control.swaps.iter().find_map(|&(a, b)| match buffer {
            _ if a == buffer => Some(b),
            _ if b == buffer => Some(a),
            _ => None,
        });
        let second = control.swaps.iter().any(|&(_, b)| b == buffer);
        // Whether every body writes it (by its end, counting a write before the statement).
        let mut every = true;
        for body in &control.bodies {
            let mut inside = *written;
            uncovered_reads(pipeline, body, buffer, &mut inside, out);
            if let Some(partner) = partner {
                // What iteration 0 leaves under this name (or what was there before).
                let own = inside;
                // The next iteration reaches this buffer through the other name, as this one
                // left it.
                uncovered_reads(pipeline, body, partner, &mut inside, out);
                let mut through_partner = false;
                uncovered_reads(
                    pipeline,
                    body,
                    partner,
                    &mut through_partner,
                    &mut Vec::new(),
                );
                // After an odd count the second buffer is copied into the first, so the first
                // holds what the body wrote through the other name; the second keeps what the
                // last even iteration wrote through its own (or, after an even count, what the
                // odd one wrote through the first name into it, iteration 0 having written it
                // already).
                inside = if second { own } else { through_partner };
            }
            every &= inside;
        }
        if let (Some((_, name)), true) = (condition, after_body) {
            // A `do ... while` has one body, which always runs before the test.
            if !every {
                out.push(name);
            }
        }
        *written |= every && runs_a_body(control);
    }
}

/// Whether `touch` names no element: a constant range that ends where it starts (`t[4..4]`,
/// `t[0..0]`), or one open at the end of a scratch buffer of constant length that starts
/// there (`t[16..]` of a 16-element `t`). It reads nothing undefined, and writes nothing a
/// later read could use.
pub fn surely_empty(pipeline: &Pipeline<'_>, touch: &crate::lower::Touch<'_>) -> bool {
    let Some((start, end)) = touch
        .subscript
        .and_then(|r| super::ranges::constant_bounds(&r))
    else {
        return false;
    };
    match end.or_else(|| constant_length(pipeline, touch.buffer)) {
        Some(end) => start >= end,
        None => false,
    }
}

/// The length of a scratch buffer (not an array) whose declaration gives a constant.
fn constant_length(pipeline: &Pipeline<'_>, buffer: BufferId) -> Option<i128> {
    let held = pipeline.buffers.get(buffer.0)?;
    if !held.scratch || held.array {
        return None;
    }
    crate::constant::value(held.len?)
}

/// Whether every run of `control` runs one of its bodies: a `do ... while`, or an `if` with
/// an `else`.
fn runs_a_body(control: &Control<'_>) -> bool {
    match control.source {
        ast::Control::DoWhile { .. } => true,
        ast::Control::If { otherwise, .. } => otherwise.is_some(),
        ast::Control::While { .. } | ast::Control::Switch { .. } => false,
    }
}

/// The buffer a control statement's condition reads, with its name as written.
fn condition_read<'a>(control: &Control<'a>) -> Option<(BufferId, &'a Ident)> {
    match (control.condition, control.source) {
        (ControlCondition::Device { value, .. }, source) => match source.test() {
            Some(ast::Condition::Device(written)) => Some((value, &written.value)),
            _ => None,
        },
        (ControlCondition::Value { value }, ast::Control::Switch { value: name, .. }) => {
            Some((value, name))
        }
        _ => None,
    }
}
