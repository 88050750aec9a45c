//! Rules on the stage graph, run once the declarations and statements passed: `after` clauses
//! close no cycle, every `concurrent(...)` claim holds (`claims.rs`), every flag `wait` can be satisfied by
//! a write ordered before it, and (`scratch.rs`) no scratch buffer is read before something
//! writes it.

use super::iterations::Iterations;
use crate::ast::{self, tokens_string};
use crate::constant::{self, Poly};
use crate::ctxt::Ctxt;
use crate::lower::{
    BufferId, Cycle, Hazard, Hop, Mode, Pipeline, Reason, Stage, StageId, StatementKind, Via,
    WaitCondition,
};

/// Runs every rule on the stage graph. A cycle is reported alone: the other rules would be
/// judged on a graph that lacks the `after` the user wrote.
pub fn check(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    if pipeline.cycles.is_empty() {
        // A dynamic pipeline's graph is a sketch; its claims are checked on the instances,
        // before each step is enqueued.
        if pipeline.dynamic {
            super::claims::claims_contradicted_in_every_instance(cx, pipeline);
        } else {
            super::claims::concurrent_claims(cx, pipeline);
        }
        flag_waits(cx, pipeline);
        super::scratch::written_first(cx, pipeline);
        super::scratch::constant_parts_written_first(cx, pipeline);
        super::switch_value::switch_values_in_range(cx, pipeline);
    }
    for cycle in &pipeline.cycles {
        after_cycle(cx, pipeline, cycle);
    }
}

/// A statement's place: its stage and its index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Site {
    pub(super) stage: StageId,
    pub(super) index: usize,
}

/// Whether `first` runs before `second` in every step: earlier in one stage, or in a stage
/// that `second`'s stage runs after.
pub(super) fn runs_before(pipeline: &Pipeline<'_>, first: Site, second: Site) -> bool {
    if first.stage == second.stage {
        first.index < second.index
    } else {
        pipeline.path(first.stage, second.stage).is_some()
    }
}

/// Why `second` runs after `first`, in words, when it does.
fn why_after(pipeline: &Pipeline<'_>, first: Site, second: Site) -> String {
    if first.stage == second.stage {
        return format!(
            "it comes later in stage `{}`",
            pipeline.stages[first.stage.0].decl.name
        );
    }
    match pipeline.path(first.stage, second.stage) {
        Some(path) => describe(pipeline, &path),
        None => format!(
            "nothing in one step orders stage `{}` before stage `{}`",
            pipeline.stages[second.stage.0].decl.name, pipeline.stages[first.stage.0].decl.name
        ),
    }
}

/// One statement that writes a flag: where, in words, and the values it may write when the
/// macro knows them all (one, or one per iteration of a `for` with constant bounds).
struct FlagWrite<'a> {
    site: Site,
    /// The value of a `write` (`None` for a `call` or a host closure).
    value: Option<&'a syn::Expr>,
    what: String,
    values: Option<Vec<i128>>,
    /// What it leaves in the flag, when known: its value, or its last iteration's (the
    /// iterations write one flag, so they run in order).
    last: Option<i128>,
    /// `write flag = i as u32` in its last iteration (`i = 3`), for messages.
    last_what: String,
    /// `write flag = i as u32` in stage `s`, without its values.
    written: String,
    /// Its value in each iteration of its stage's `for` with constant bounds, in order (`None`
    /// where one does not evaluate); empty outside such a loop.
    by_iteration: Vec<Option<i128>>,
}

impl FlagWrite<'_> {
    /// Whether some value it may write satisfies `condition` against `wanted`; unknown
    /// values might.
    fn may_satisfy(
        &self,
        condition: WaitCondition,
        wanted: Option<i128>,
        bits: Option<u32>,
    ) -> bool {
        match &self.values {
            Some(values) => values
                .iter()
                .any(|&value| satisfies(Some(value), condition, wanted, bits)),
            None => true,
        }
    }
}

/// The values `write flag = value` writes, and the one it leaves, from its value in each
/// iteration of its loop (`by_iteration`, [`per_iteration`]): one when it is a constant, one
/// per iteration when the stage is inside a `for` with constant bounds that runs at least
/// once (`write flag = i as u32` over `0..4` writes 0, 1, 2 and 3, sorted and each once, and
/// leaves 3); `None` when some iteration's value is unknown.
fn written_values(
    by_iteration: &[Option<i128>],
    value: &syn::Expr,
) -> (Option<Vec<i128>>, Option<i128>) {
    if let Some(value) = constant::value(value) {
        return (Some(vec![value]), Some(value));
    }
    let Some(mut values) = by_iteration.iter().copied().collect::<Option<Vec<i128>>>() else {
        return (None, None);
    };
    // A loop that runs no iteration (or none at all) writes nothing: what the wait sees is
    // then unknown here.
    let last = values.last().copied();
    values.sort_unstable();
    values.dedup();
    ((!values.is_empty()).then_some(values), last)
}

/// The value of `expr` in each iteration of `stage`'s `for` when its bounds are constants, in
/// order (`None` where it does not evaluate); empty outside such a loop.
fn per_iteration(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    expr: &syn::Expr,
) -> Vec<Option<i128>> {
    let Some(iterations) = stage
        .looped
        .and_then(|looped| Iterations::of(pipeline.loops[looped]))
    else {
        return Vec::new();
    };
    iterations
        .range
        .clone()
        .map(|i| {
            let names = iterations.values(i);
            constant::value_in(expr, &|name| names.get(&name.to_string()).copied())
        })
        .collect()
}

/// Whether `write`, later in the waiting stage's own `for`, is a token passed from iteration
/// to iteration (`wait flag == i as u32; write flag = (i + 1) as u32;`): every iteration `i`
/// after the first waits for what iteration `i - 1` wrote (the iterations touch one flag, so
/// they run in order), and the first for what the flag holds before the loop (`initial`: 0
/// for a scratch flag nothing wrote, unknown for a param). Unknown values might satisfy.
fn passed_on(
    write: &FlagWrite<'_>,
    waits: &[Option<i128>],
    initial: Option<i128>,
    condition: WaitCondition,
    bits: Option<u32>,
) -> bool {
    let Some(&first) = waits.first() else {
        return false;
    };
    // `wait flag & 0` holds for no value, known or not.
    let never = |wanted: Option<i128>| condition == WaitCondition::AnyBit && wanted == Some(0);
    let first_holds = !never(first) && satisfies(initial, condition, first, bits);
    first_holds
        && waits
            .iter()
            .skip(1)
            .zip(&write.by_iteration)
            .all(|(&wanted, &written)| {
                !never(wanted) && satisfies(written, condition, wanted, bits)
            })
}

/// [`passed_on`] for a `for` whose bounds are not constants: the values as polynomials over
/// the loop variable and the params. Iteration `i + 1` waits for `wait` with `i + 1` for the
/// loop variable and sees what iteration `i` wrote, `written`; the first iteration, where its
/// start is a constant, sees `initial`. A value that is not a polynomial (a `let`, a
/// division), or a difference that changes with the iteration, might be passed on.
fn passed_on_symbolically(
    body: &ast::ForLoop,
    wait: &syn::Expr,
    written: Option<&syn::Expr>,
    initial: Option<i128>,
    condition: WaitCondition,
    bits: Option<u32>,
) -> bool {
    if condition == WaitCondition::AnyBit && constant::value(wait) == Some(0) {
        return false;
    }
    let first = constant::value(&body.start)
        .and_then(|start| constant::value_in(wait, &|name| (*name == body.var).then_some(start)));
    if !satisfies(initial, condition, first, bits) {
        return false;
    }
    let (Some(wanted), Some(written)) = (
        in_loop_terms(body, wait, bits.unwrap_or(64)),
        written.and_then(|written| in_loop_terms(body, written, bits.unwrap_or(64))),
    ) else {
        return true;
    };
    match in_next_iteration(body, &wanted)
        .and_then(|next| written.sub(&next))
        .map(|d| d.as_constant())
    {
        // `written - wanted` is the same in every iteration: compared as the GPU compares.
        Some(Some(difference)) if condition != WaitCondition::AnyBit => {
            satisfies(Some(difference), condition, Some(0), bits)
        }
        _ => true,
    }
}

/// `expr` as a polynomial over `body`'s loop variable and the params (a `let` of the body,
/// which changes per iteration in ways a polynomial does not follow, has none), where its
/// casts keep the low `bits` bits that matter (a flag value compared as a word of `bits`
/// bits, or 64 for a loop bound).
pub(super) fn in_loop_terms(body: &ast::ForLoop, expr: &syn::Expr, bits: u32) -> Option<Poly> {
    if !constant::casts_keep(expr, bits) {
        return None;
    }
    let names = |name: &syn::Ident| {
        let lets = body.lets.iter().any(|binding| binding.name == *name);
        (!lets).then(|| Poly::unknown(&name.to_string()))
    };
    constant::polynomial(expr, &names)
}

/// `value` (over `body`'s loop variable `i`) in the next iteration: `i + 1` for `i`.
pub(super) fn in_next_iteration(body: &ast::ForLoop, value: &Poly) -> Option<Poly> {
    let var = body.var.to_string();
    value.substitute(&var, &Poly::unknown(&var).add(&Poly::constant(1))?)
}

/// `write flag = 3` or, for the values of a loop, `write flag = i as u32` (which writes 0,
/// 1, 2 and 3 in the iterations of its `for`), for messages.
fn values_text(values: &Option<Vec<i128>>, written: &str) -> String {
    match values.as_deref() {
        Some([_]) | None => written.to_owned(),
        Some(values) => {
            const SHOWN: usize = 8;
            let mut listed: Vec<String> = values.iter().take(SHOWN).map(i128::to_string).collect();
            let list = if values.len() > SHOWN {
                format!("{}, ...", listed.join(", "))
            } else {
                let last = listed.pop().unwrap_or_default();
                format!("{} and {last}", listed.join(", "))
            };
            format!("{written} (which writes {list} in the iterations of its `for`)")
        }
    }
}

/// Every statement that writes `flag`.
fn flag_writes<'a>(pipeline: &Pipeline<'a>, flag: BufferId) -> Vec<FlagWrite<'a>> {
    let mut writes = Vec::new();
    for (stage_id, stage) in pipeline.stages.iter().enumerate() {
        for (index, statement) in stage.statements.iter().enumerate() {
            let writes_flag = statement
                .accesses
                .iter()
                .any(|touch| touch.buffer == flag && touch.mode == Mode::Write);
            if !writes_flag {
                continue;
            }
            let value = match &statement.kind {
                StatementKind::Write { source, .. } => Some(&source.value),
                _ => None,
            };
            let (what, values, last, by_iteration) = match &statement.kind {
                StatementKind::Write { source, .. } => {
                    let by_iteration = per_iteration(pipeline, stage, &source.value);
                    let (values, last) = written_values(&by_iteration, &source.value);
                    let written =
                        format!("`write {} = {}`", source.flag, tokens_string(&source.value));
                    (written, values, last, by_iteration)
                }
                StatementKind::Call { .. } => ("a `call`".to_owned(), None, None, Vec::new()),
                StatementKind::Host { .. } => ("a host closure".to_owned(), None, None, Vec::new()),
                _ => ("a statement".to_owned(), None, None, Vec::new()),
            };
            let what = format!("{what} in stage `{}`", stage.decl.name);
            let last_what = match (values.as_deref(), last) {
                (Some([_]) | None, _) | (_, None) => what.clone(),
                (Some(_), Some(last)) => format!("{what} in its last iteration (it writes {last})"),
            };
            writes.push(FlagWrite {
                site: Site {
                    stage: StageId(stage_id),
                    index,
                },
                value,
                what: values_text(&values, &what),
                written: what,
                values,
                last,
                last_what,
                by_iteration,
            });
        }
    }
    writes
}

/// Whether a flag holding `value` satisfies `condition` against `wanted`, as the GPU compares
/// them (`>=` is a wrapping comparison of `bits`-bit words); unknown values might.
pub(super) fn satisfies(
    value: Option<i128>,
    condition: WaitCondition,
    wanted: Option<i128>,
    bits: Option<u32>,
) -> bool {
    let (Some(value), Some(wanted), Some(bits)) = (value, wanted, bits) else {
        return true;
    };
    let mask = (1i128 << bits) - 1;
    let (value, wanted) = (value & mask, wanted & mask);
    match condition {
        WaitCondition::Equal => value == wanted,
        WaitCondition::AnyBit => value & wanted != 0,
        WaitCondition::AtLeast => {
            let difference = (value - wanted) & mask;
            difference < (1i128 << (bits - 1))
        }
    }
}

/// A `wait` blocks its stream until the flag satisfies it, and nothing but a write the GPU
/// reaches first can make it so. A wait whose only satisfying writes are ordered after it
/// (through a data hazard, `after`, stream order or its own stage) waits for ever; so does one
/// that sees a known value that does not satisfy it, or a scratch flag nothing writes. A param
/// flag that no statement could satisfy is set outside the pipeline, and is left alone.
fn flag_waits(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    for (stage_id, stage) in pipeline.stages.iter().enumerate() {
        for (index, statement) in stage.statements.iter().enumerate() {
            let StatementKind::Wait {
                source,
                flag,
                condition,
            } = &statement.kind
            else {
                continue;
            };
            let site = Site {
                stage: StageId(stage_id),
                index,
            };
            let cell = &pipeline.buffers[flag.0];
            // A word width spelled otherwise (an alias) is unknown: so are the values then.
            let bits = match cell.elem.map(tokens_string).as_deref() {
                None | Some("u32") => Some(32),
                Some("u64") => Some(64),
                Some(_) => None,
            };
            let wanted = constant::value(&source.value);
            let wait = format!(
                "`wait {} {} {}`",
                source.flag,
                match condition {
                    WaitCondition::Equal => "==",
                    WaitCondition::AtLeast => ">=",
                    WaitCondition::AnyBit => "&",
                },
                tokens_string(&source.value)
            );
            let writes = flag_writes(pipeline, *flag);
            // A write in another kind of step runs in another step, before or after this one
            // as the application enqueues them: the flag may hold what it left.
            let same_kind =
                |write: &&FlagWrite<'_>| pipeline.stages[write.site.stage.0].kind == stage.kind;
            let elsewhere = writes
                .iter()
                .any(|write| !same_kind(&write) && write.may_satisfy(*condition, wanted, bits));
            let (before, after): (Vec<&FlagWrite<'_>>, Vec<&FlagWrite<'_>>) = writes
                .iter()
                .filter(same_kind)
                .partition(|write| runs_before(pipeline, write.site, site));
            // The write the wait sees is the last of those before it.
            let last = before.iter().find(|write| {
                !before.iter().any(|other| {
                    other.site != write.site && runs_before(pipeline, write.site, other.site)
                })
            });
            if let Some(last) = last {
                // The iterations of a looped write write one flag, so they run in order and
                // the wait sees the last one's value.
                if last.last.is_some() && !satisfies(last.last, *condition, wanted, bits) {
                    cx.error_spanned_by(
                        &source.value,
                        format!(
                            "{wait} in stage `{}` sees the value of {}, the last write before it, which never satisfies it: the stream would wait for ever; wait for the value written, or write the value waited for",
                            stage.decl.name, last.last_what
                        ),
                    );
                } else if wanted.is_none() {
                    looped_wait_after(
                        cx, pipeline, stage, source, &wait, last, &writes, *condition, bits,
                    );
                }
                continue;
            }
            let waits = per_iteration(pipeline, stage, &source.value);
            // No write runs before the wait (that case ended above): the loop starts from
            // what a scratch flag starts with, or from the world outside.
            let initial = (cell.scratch && !elsewhere).then_some(0);
            // A write later in the wait's own `for` (in its stage or a later one) reaches the
            // next iteration's wait: the iterations touch one flag, so they run in order.
            let looped = stage.looped.map(|l| pipeline.loops[l]);
            let in_loop = |write: &FlagWrite<'_>| {
                looped.is_some() && pipeline.stages[write.site.stage.0].looped == stage.looped
            };
            let in_a_later_iteration = |write: &FlagWrite<'_>, initial: Option<i128>| {
                let Some(body) = looped.filter(|_| in_loop(write)) else {
                    return false;
                };
                match Iterations::of(body) {
                    Some(_) => passed_on(write, &waits, initial, *condition, bits),
                    None => passed_on_symbolically(
                        body,
                        &source.value,
                        write.value,
                        initial,
                        *condition,
                        bits,
                    ),
                }
            };
            // What the next iteration sees: the last write of the loop after the wait. A
            // write after the loop runs after every iteration, and helps none of them.
            let looped_after: Vec<&FlagWrite<'_>> = after
                .iter()
                .copied()
                .filter(|write| in_loop(write))
                .collect();
            let passes_token = |initial: Option<i128>| {
                last_of(pipeline, looped_after.iter().copied())
                    .is_some_and(|write| in_a_later_iteration(write, initial))
            };
            let token = passes_token(initial);
            // A scratch flag starts a first step at 0: a wait that 0 satisfies needs no
            // later write (the next step is judged below).
            let at_zero = cell.scratch
                && wanted.is_some()
                && !(*condition == WaitCondition::AnyBit && wanted == Some(0))
                && satisfies(Some(0), *condition, wanted, bits);
            if let Some(write) = after.iter().find(|write| {
                !token
                    && !at_zero
                    && !elsewhere
                    && write.may_satisfy(*condition, wanted, bits)
                    && !in_a_later_iteration(write, initial)
            }) {
                let fix = if write.site.stage == site.stage {
                    "put the write before the wait"
                } else {
                    "write the flag in a stage this one runs after, or wait in a later stage"
                };
                cx.error_spanned_by(
                    source.keyword,
                    format!(
                        "{wait} in stage `{}` can only be satisfied by {}, which runs after it ({}): the stream would wait for ever; {fix}",
                        stage.decl.name,
                        write.what,
                        why_after(pipeline, site, write.site),
                    ),
                );
                continue;
            }
            // Without a token, the next iteration sees what the loop's last write left.
            if !token
                && let Some(body) = looped
                && let Some(write) = last_of(pipeline, looped_after.iter().copied())
            {
                let looped_wait = super::flag_iterations::LoopedWait {
                    body,
                    wanted: &source.value,
                    waits: &waits,
                    written: write.value,
                    by_iteration: &write.by_iteration,
                    initial,
                    condition: *condition,
                    bits,
                };
                if let Some(hang) = looped_wait.hang() {
                    cx.error_spanned_by(
                        source.keyword,
                        super::flag_iterations::message(
                            body,
                            &wait,
                            &stage.name,
                            &source.flag,
                            &write.written,
                            &hang,
                        ),
                    );
                    continue;
                }
            }
            if cell.scratch && !elsewhere && !token && !satisfies(Some(0), *condition, wanted, bits)
            {
                // Writes of other kinds of step, none of them a value that satisfies it.
                let others: Vec<&str> = writes
                    .iter()
                    .filter(|write| !same_kind(write))
                    .map(|write| write.what.as_str())
                    .collect();
                let message = if others.is_empty() {
                    format!(
                        "{wait} in stage `{}` waits on scratch flag `{}`, which nothing writes before it and nothing outside the pipeline can: it stays 0 and the stream would wait for ever; `write {} = VALUE` in a stage this one runs after",
                        stage.decl.name, source.flag, source.flag,
                    )
                } else {
                    format!(
                        "{wait} in stage `{}` waits on scratch flag `{}`, which nothing in its kind of step writes before it, and which holds 0 or what the other kinds of step leave ({}), none of which satisfies it: the stream would wait for ever; `write {} = VALUE` in a stage this one runs after",
                        stage.decl.name,
                        source.flag,
                        others.join(", "),
                        source.flag,
                    )
                };
                cx.error_spanned_by(source.keyword, message);
                continue;
            }
            // Over params, the token the last iteration leaves is the one the next step's
            // first iteration would have to find.
            if cell.scratch
                && token
                && *condition == WaitCondition::Equal
                && let Some(body) = looped
                && let Some(write) =
                    token_left_over_params(pipeline, body, stage, &source.value, &writes, bits)
            {
                let var = &body.var;
                let (start, end) = (tokens_string(&body.start), tokens_string(&body.end));
                cx.error_spanned_by(
                    source.keyword,
                    format!(
                        "{wait} in stage `{}` passes a token from iteration to iteration of `for {var} in {start}..{end}`, and a first step finds scratch flag `{flag}` at 0, but a scratch flag keeps what a step leaves: {} leaves the token of `{var} = {end}`, and the next step's first iteration waits for that of `{var} = {start}`, so whenever the loop runs the next step would wait for ever; reset the flag at the end of the step (`write {flag} = 0;` in a stage after the loop), or make it a param the host sets",
                        stage.decl.name,
                        write.written,
                        flag = source.flag,
                    ),
                );
                continue;
            }
            // A scratch flag keeps what a step leaves: the next step starts from that value,
            // not from 0.
            let Some(left) = cell
                .scratch
                .then(|| value_left(pipeline, &writes))
                .flatten()
            else {
                continue;
            };
            let next_holds = if token {
                passes_token(left.last)
            } else {
                satisfies(left.last, *condition, wanted, bits)
            };
            if !next_holds {
                cx.error_spanned_by(
                    source.keyword,
                    format!(
                        "{wait} in stage `{}` holds in a first step, which finds scratch flag `{flag}` at 0, but a scratch flag keeps what a step leaves, and {} leaves {}: the next step would wait for ever; reset the flag at the end of the step (`write {flag} = 0;` in a stage after the last wait), or make it a param the host sets",
                        stage.decl.name,
                        left.last_what,
                        left.last.unwrap_or_default(),
                        flag = source.flag,
                    ),
                );
            }
        }
    }
}

/// For a token passed on in a `for` whose bounds are not constants (`for i in 0..n { wait
/// flag == i as u32; write flag = (i + 1) as u32; }`), the write that leaves the step's last
/// token in the flag, when the next step's first iteration cannot find its own there: the
/// write runs after every other write of the flag, in the wait's own loop, and passes the
/// token exactly (iteration `i` writes what iteration `i + 1` waits for), so the step leaves
/// the token of `i = end` where the next one starts by waiting for that of `i = start`. The
/// tokens step by a non-zero constant `c`, so the two differ by `c * (end - start)`: whenever
/// the loop runs. `None` where any of that is unknown, or the pipeline has several kinds of
/// step.
fn token_left_over_params<'w, 'a>(
    pipeline: &Pipeline<'_>,
    body: &ast::ForLoop,
    stage: &Stage<'_>,
    wait: &syn::Expr,
    writes: &'w [FlagWrite<'a>],
    bits: Option<u32>,
) -> Option<&'w FlagWrite<'a>> {
    if pipeline.kinds.len() != 1 || Iterations::of(body).is_some() {
        return None;
    }
    let write = last_of(pipeline, writes.iter())?;
    if pipeline.stages[write.site.stage.0].looped != stage.looped {
        return None;
    }
    let var = body.var.to_string();
    let width = bits?;
    let wanted = in_loop_terms(body, wait, width)?;
    let written = in_loop_terms(body, write.value?, width)?;
    let at = |value: &Poly| wanted.substitute(&var, value);
    let next = in_next_iteration(body, &wanted)?;
    if written.sub(&next)?.as_constant()? != 0 {
        return None;
    }
    let step = next.sub(&wanted)?.as_constant()?;
    let modulus = 1i128 << bits?;
    if step.rem_euclid(modulus) == 0 {
        return None;
    }
    let (start, end) = (
        in_loop_terms(body, &body.start, 64)?,
        in_loop_terms(body, &body.end, 64)?,
    );
    let apart = at(&end)?.sub(&at(&start)?)?;
    let expected = end.sub(&start)?.scale(step)?;
    (apart.sub(&expected)?.as_constant()? == 0).then_some(write)
}

/// Of `writes`, the one that runs after every other, when there is one.
fn last_of<'w, 'a: 'w>(
    pipeline: &Pipeline<'_>,
    writes: impl Iterator<Item = &'w FlagWrite<'a>> + Clone,
) -> Option<&'w FlagWrite<'a>> {
    let mut last = writes.clone().filter(|write| {
        !writes
            .clone()
            .any(|other| other.site != write.site && runs_before(pipeline, write.site, other.site))
    });
    match (last.next(), last.next()) {
        (Some(write), None) => Some(write),
        _ => None,
    }
}

/// The write of a flag that runs after every other one in the step, when there is one and
/// its value is known: what a scratch flag holds when the next step starts. Unknown where
/// the pipeline has several kinds of step (the next step may be of another kind).
fn value_left<'w, 'a>(
    pipeline: &Pipeline<'_>,
    writes: &'w [FlagWrite<'a>],
) -> Option<&'w FlagWrite<'a>> {
    if pipeline.kinds.len() != 1 {
        return None;
    }
    last_of(pipeline, writes.iter()).filter(|write| write.last.is_some())
}

/// A wait whose value changes with the iterations of its `for` with constant bounds, after a
/// write before it (`write flag = 1;` then `for i in 0..4 { wait flag == (i + 1) as u32; }`):
/// each iteration sees what `last` leaves, or, when `last` is in the same `for`, what it
/// wrote in that iteration. An iteration whose value that never satisfies waits for ever.
/// A write of the flag later in the loop (a token passed on) changes what the next
/// iteration sees: that is judged where no write runs before the wait.
#[allow(clippy::too_many_arguments)]
fn looped_wait_after(
    cx: &Ctxt,
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    source: &ast::Wait,
    wait: &str,
    last: &FlagWrite<'_>,
    writes: &[FlagWrite<'_>],
    condition: WaitCondition,
    bits: Option<u32>,
) {
    let Some(body) = stage.looped.map(|l| pipeline.loops[l]) else {
        return;
    };
    let in_loop =
        |write: &FlagWrite<'_>| pipeline.stages[write.site.stage.0].looped == stage.looped;
    let same_iteration = in_loop(last);
    // Every write of the flag in the loop other than `last` runs before it in the iteration.
    let others_before = writes.iter().all(|write| {
        write.site == last.site || !in_loop(write) || runs_before(pipeline, write.site, last.site)
    });
    if !others_before {
        return;
    }
    let waits = per_iteration(pipeline, stage, &source.value);
    let start = Iterations::of(body).map_or(0, |iterations| iterations.range.start);
    for (n, &wanted) in waits.iter().enumerate() {
        let seen = if same_iteration {
            last.by_iteration.get(n).copied().flatten()
        } else {
            last.last
        };
        let never = condition == WaitCondition::AnyBit && wanted == Some(0);
        if !never && satisfies(seen, condition, wanted, bits) {
            continue;
        }
        let (Some(wanted), Ok(n)) = (wanted, i128::try_from(n)) else {
            continue;
        };
        let what = match (same_iteration, seen) {
            (true, Some(seen)) => {
                format!("{} in the same iteration (it writes {seen})", last.written)
            }
            _ => last.last_what.clone(),
        };
        cx.error_spanned_by(
            &source.value,
            format!(
                "{wait} in stage `{}` sees the value of {what}, the last write before it, which never satisfies it when `{} = {}` (it waits for {wanted}): the stream would wait for ever; wait for the value written, or write the value waited for",
                stage.decl.name,
                body.var,
                start + n,
            ),
        );
        return;
    }
}

/// `after` may name a later stage, but not one that already runs after this stage through
/// stream order, data accesses or other `after`s: that would be a cycle, and the step could
/// never run. The message walks the path that closes it.
fn after_cycle(cx: &Ctxt, pipeline: &Pipeline<'_>, cycle: &Cycle) {
    let Some(stage) = pipeline.stages.get(cycle.stage.0) else {
        return;
    };
    let Some(named) = stage.decl.after.get(cycle.after) else {
        return;
    };
    cx.error_spanned_by(
        named,
        format!(
            "stage `{}` cannot run after `{named}`, which already runs after it: {}; remove `{named}` from `after`",
            stage.decl.name,
            describe(pipeline, &cycle.path),
        ),
    );
}

/// A path of orderings in words: "`save` reads `next` after `step` writes it, and ...".
pub(super) fn describe(pipeline: &Pipeline<'_>, path: &[Hop]) -> String {
    let stage = |id: StageId| {
        pipeline
            .stages
            .get(id.0)
            .map_or(String::new(), |s| s.decl.name.to_string())
    };
    let hops: Vec<String> = path
        .iter()
        .map(|hop| {
            let (from, to) = (stage(hop.from), stage(hop.to));
            match hop.via {
                Via::Stream(stream) => {
                    let name = pipeline
                        .streams
                        .get(stream.0)
                        .map_or(String::new(), |s| s.decl.name.to_string());
                    format!("`{to}` follows `{from}` on stream `{name}`")
                }
                Via::Dependency(Reason::After) => format!("`{to}` is declared `after {from}`"),
                Via::Dependency(Reason::Hazard { buffer, hazard }) => {
                    let buffer = pipeline
                        .buffers
                        .get(buffer.0)
                        .map_or(String::new(), |b| b.ident.to_string());
                    let (later, earlier) = match hazard {
                        Hazard::ReadAfterWrite => ("reads", "writes"),
                        Hazard::WriteAfterRead => ("writes", "reads"),
                        Hazard::WriteAfterWrite => ("writes", "writes"),
                    };
                    format!("`{to}` {later} `{buffer}` after `{from}` {earlier} it")
                }
            }
        })
        .collect();
    hops.join(", and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_comparisons_follow_the_gpu() {
        let at_least =
            |value, wanted| satisfies(Some(value), WaitCondition::AtLeast, Some(wanted), Some(32));
        assert!(at_least(3, 2));
        assert!(at_least(2, 2));
        assert!(!at_least(1, 2));
        // Wrapping: 0 is "after" 0xffff_ffff.
        assert!(at_least(0, 0xffff_ffff));
        assert!(satisfies(Some(3), WaitCondition::AnyBit, Some(1), Some(32)));
        assert!(!satisfies(
            Some(2),
            WaitCondition::AnyBit,
            Some(1),
            Some(32)
        ));
        assert!(!satisfies(Some(1), WaitCondition::Equal, Some(2), Some(32)));
        assert!(satisfies(None, WaitCondition::Equal, Some(2), Some(32)));
        // 64-bit words compare all their bits; a width the macro cannot tell, nothing.
        assert!(satisfies(
            Some(1 << 32),
            WaitCondition::AtLeast,
            Some(1),
            Some(64)
        ));
        assert!(!satisfies(
            Some(1 << 32),
            WaitCondition::AtLeast,
            Some(1),
            Some(32)
        ));
        assert!(satisfies(Some(1), WaitCondition::Equal, Some(2), None));
    }
}
