//! Rules on the stage graph, run once the declarations and statements passed: `after` clauses
//! close no cycle, and every `concurrent(...)` claim holds.

use crate::ctxt::Ctxt;
use crate::lower::{Cycle, Hazard, Hop, Pipeline, Reason, StageId, Via};

/// Runs every rule on the stage graph. A cycle is reported alone: the claims would be judged
/// on a graph that lacks the `after` the user wrote.
pub fn check(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    if pipeline.cycles.is_empty() {
        concurrent_claims(cx, pipeline);
    }
    for cycle in &pipeline.cycles {
        after_cycle(cx, pipeline, cycle);
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

/// `concurrent(a, b, ...)` claims that no two of the stages are ordered. A claim the accesses
/// contradict is an error naming what orders them, so a refactor that serialises two stages
/// by accident fails to compile.
fn concurrent_claims(cx: &Ctxt, pipeline: &Pipeline<'_>) {
    let stage_id = |name: &syn::Ident| {
        pipeline
            .stages
            .iter()
            .position(|stage| stage.decl.name == *name)
    };
    for claim in pipeline.input.claims() {
        let named: Vec<_> = claim.stages.iter().collect();
        for (j, second) in named.iter().enumerate() {
            for first in &named[..j] {
                let (Some(a), Some(b)) = (stage_id(first), stage_id(second)) else {
                    continue;
                };
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
    }
}

/// A path of orderings in words: "`save` reads `next` after `step` writes it, and ...".
fn describe(pipeline: &Pipeline<'_>, path: &[Hop]) -> String {
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
