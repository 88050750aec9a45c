//! `concurrent(...)` claims: no two of the named stages are ordered. Checked on the stage
//! graph of a pipeline whose shape the macro knows, and, for one shaped at run time (arrays,
//! loops over params), on what every instance shares.

use super::iterations::Evaluation;
use super::ordering::describe;
use crate::ast::{self, tokens_string};
use crate::ctxt::Ctxt;
use crate::lower::{BufferId, Mode, Pipeline, Stage, StageId};

/// `concurrent(a, b, ...)` claims that no two of the stages are ordered. A claim the accesses
/// contradict is an error naming what orders them, so a refactor that serialises two stages
/// by accident fails to compile.
pub(super) fn concurrent_claims(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    for ((a, first), (b, second)) in claimed_pairs(pipeline) {
        if a == b {
            continue;
        }
        let (earlier, later) = (StageId(a.min(b)), StageId(a.max(b)));
        let path = pipeline
            .path(earlier, later)
            .or_else(|| pipeline.path(later, earlier));
        let stream = pipeline.stages[a].stream;
        let message = if stream == pipeline.stages[b].stream {
            format!(
                "`{first}` and `{second}` both run on stream `{}`, which runs them one after the other; put one on another stream, or drop the claim",
                pipeline.streams[stream.0].name,
            )
        } else if let Some(path) = path {
            format!(
                "`{first}` and `{second}` cannot run concurrently: {}; drop the claim, or remove that ordering",
                describe(pipeline, &path),
            )
        } else {
            continue;
        };
        cx.error_between(first.span(), second.span(), message);
    }
}

/// A stage a claim names: its index among the pipeline's stages, and the name as written.
type Named<'p> = (usize, &'p syn::Ident);

/// Every pair of stages one `concurrent(...)` claim names, each with its index among the
/// pipeline's stages, the earlier-named first; a name of no stage is left out (reported
/// where names are resolved).
fn claimed_pairs<'p>(pipeline: &'p Pipeline<'_>) -> Vec<(Named<'p>, Named<'p>)> {
    let stage_id = |name: &syn::Ident| {
        pipeline
            .stages
            .iter()
            .position(|stage| stage.decl.name == *name)
    };
    let mut pairs = Vec::new();
    for claim in pipeline.input.claims() {
        let named: Vec<_> = claim.stages.iter().collect();
        for (j, second) in named.iter().enumerate() {
            for first in &named[..j] {
                if let (Some(a), Some(b)) = (stage_id(first), stage_id(second)) {
                    pairs.push(((a, *first), (b, *second)));
                }
            }
        }
    }
    pairs
}

/// In a step whose shape is known only when it is enqueued (a loop, a stream array, a range
/// over params), `concurrent` claims are checked on the stage instances before each step; the
/// ones that every instance contradicts are errors here already: two stages of one iteration
/// (or both outside loops) on the same stream (one stream, or the same element of an array
/// written alike), one declared `after` the other, or both touching a whole buffer that one
/// of them writes.
pub(super) fn claims_contradicted_in_every_instance(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    for ((a, first), (b, second)) in claimed_pairs(pipeline) {
        let (sa, sb) = (&pipeline.stages[a], &pipeline.stages[b]);
        if a == b || sa.looped != sb.looped || sa.kind != sb.kind {
            continue;
        }
        let Some(message) = contradiction(pipeline, (a, first), (b, second)) else {
            continue;
        };
        cx.error_between(first.span(), second.span(), message);
    }
}

/// What orders two stages of one iteration in every instance, in words.
fn contradiction(
    pipeline: &Pipeline<'_>,
    (a, first): (usize, &syn::Ident),
    (b, second): (usize, &syn::Ident),
) -> Option<String> {
    let (sa, sb) = (&pipeline.stages[a], &pipeline.stages[b]);
    let lane = |lane: Option<&syn::Expr>| lane.map(tokens_string);
    // One element of a stream array: written alike, or of one value in every evaluation
    // (`work[1]` and `work[2 - 1]`).
    let evaluations = Evaluation::of_loop(sa.looped.map(|l| pipeline.loops[l]));
    let one_lane = match (sa.lane, sb.lane) {
        (Some(x), Some(y)) => {
            tokens_string(x) == tokens_string(y)
                || !evaluations.is_empty()
                    && evaluations
                        .iter()
                        .all(|at| at.value(x).is_some() && at.value(x) == at.value(y))
        }
        (x, y) => lane(x) == lane(y),
    };
    if sa.stream == sb.stream && one_lane {
        let stream = &pipeline.streams[sa.stream.0].name;
        let element = lane(sa.lane).map_or(String::new(), |l| format!("[{l}]"));
        return Some(format!(
            "`{first}` and `{second}` both run on stream `{stream}{element}`, which runs them one after the other; put one on another stream, or drop the claim",
        ));
    }
    let (earlier, later) = if a < b { (sa, sb) } else { (sb, sa) };
    let (earlier_id, later_id) = (StageId(a.min(b)), StageId(a.max(b)));
    if later.after.contains(&earlier_id) || earlier.after.contains(&later_id) {
        let (to, from) = if later.after.contains(&earlier_id) {
            (later, earlier)
        } else {
            (earlier, later)
        };
        return Some(format!(
            "`{first}` and `{second}` cannot run concurrently: `{}` is declared `after {}`; drop the claim, or remove that ordering",
            to.decl.name, from.decl.name
        ));
    }
    // Whole buffers: the same buffer in every instance.
    let whole = |stage: &crate::lower::Stage<'_>| -> Vec<(BufferId, Mode)> {
        stage
            .statements
            .iter()
            .flat_map(|statement| &statement.accesses)
            .filter(|touch| touch.subscript.is_none())
            .map(|touch| (touch.buffer, touch.mode))
            .collect()
    };
    if let Some(message) = ranges_contradiction(pipeline, earlier, later, first, second) {
        return Some(message);
    }
    let (before, after) = (whole(earlier), whole(later));
    for &(buffer, mode) in &after {
        let Some(&(_, earlier_mode)) = before
            .iter()
            .filter(|(other, _)| *other == buffer)
            .max_by_key(|(_, m)| *m)
        else {
            continue;
        };
        let later_mode = after
            .iter()
            .filter(|(other, _)| *other == buffer)
            .map(|(_, m)| *m)
            .max()
            .unwrap_or(mode);
        if earlier_mode == Mode::Read && later_mode == Mode::Read {
            continue;
        }
        let verb = |m: Mode| if m == Mode::Write { "writes" } else { "reads" };
        let name = pipeline
            .buffers
            .get(buffer.0)
            .map_or(String::new(), |b| b.ident.to_string());
        return Some(format!(
            "`{first}` and `{second}` cannot run concurrently: `{}` {} `{name}` after `{}` {} it; drop the claim, or remove that ordering",
            later.decl.name,
            verb(later_mode),
            earlier.decl.name,
            verb(earlier_mode),
        ));
    }
    None
}

/// Two stages of one iteration that name a common element in every evaluation, one of them
/// writing it: `xs[0]` in both, `x[0..4]` and `x[2..8]`, `x` and `x[0..4]` (with the loop
/// variable at each value of a `for` with constant bounds). The step orders them in every
/// instance, so the claim cannot hold. Whole buffers named without subscripts in both are
/// reported by the caller.
fn ranges_contradiction(
    pipeline: &Pipeline<'_>,
    earlier: &Stage<'_>,
    later: &Stage<'_>,
    first: &syn::Ident,
    second: &syn::Ident,
) -> Option<String> {
    let evaluations = Evaluation::of_loop(earlier.looped.map(|l| pipeline.loops[l]));
    if evaluations.is_empty() {
        return None;
    }
    fn touches<'a>(stage: &Stage<'a>) -> Vec<(BufferId, Mode, ast::BufRef<'a>)> {
        stage
            .statements
            .iter()
            .flat_map(|statement| &statement.accesses)
            .map(|touch| {
                let reference = touch.subscript.unwrap_or(ast::BufRef {
                    name: touch.name,
                    index: None,
                    range: None,
                    last: touch.name.span(),
                });
                (touch.buffer, touch.mode, reference)
            })
            .collect()
    }
    let (before, after) = (touches(earlier), touches(later));
    for (buffer, later_mode, b) in &after {
        for (other, earlier_mode, a) in &before {
            let subscripted =
                a.index.is_some() || a.range.is_some() || b.index.is_some() || b.range.is_some();
            if other != buffer
                || !subscripted
                || (*earlier_mode == Mode::Read && *later_mode == Mode::Read)
                || !evaluations
                    .iter()
                    .all(|at| super::ranges::surely_overlap(a, b, at))
            {
                continue;
            }
            let verb = |m: Mode| if m == Mode::Write { "writes" } else { "reads" };
            return Some(format!(
                "`{first}` and `{second}` cannot run concurrently: `{}` {} `{}` after `{}` {} `{}`, which share elements; drop the claim, or remove that ordering",
                later.decl.name,
                verb(*later_mode),
                super::ranges::reference_text(b),
                earlier.decl.name,
                verb(*earlier_mode),
                super::ranges::reference_text(a),
            ));
        }
    }
    None
}
