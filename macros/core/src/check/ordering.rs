//! Rules on the stage graph, run once the declarations and statements passed: `after` clauses
//! close no cycle, and every `concurrent(...)` claim holds.

use crate::ctxt::Ctxt;
use crate::lower::{self, Cycle, Hazard, Hop, Reason, StageId, Via};
use crate::scope::Scope;

/// Lowers the pipeline and checks the rules that need its graph.
pub fn check(scope: &Scope<'_>) -> syn::Result<lower::Pipeline> {
    let cx = Ctxt::new();
    match lower::lower(scope) {
        Ok(pipeline) => {
            concurrent_claims(&cx, scope, &pipeline);
            cx.check()?;
            Ok(pipeline)
        }
        Err(lower::Error::Cycles(cycles)) => {
            for cycle in &cycles {
                after_cycle(&cx, scope, cycle);
            }
            cx.check()?;
            // `Cycles` is never empty; this only keeps the function total.
            Err(syn::Error::new(
                scope.input.name.span(),
                "`after` closes a cycle",
            ))
        }
        Err(lower::Error::Unresolved(name)) => Err(syn::Error::new(
            scope.input.name.span(),
            format!(
                "internal error in `gpu_pipeline!`: `{name}` passed the checks but did not resolve; please report this bug"
            ),
        )),
    }
}

/// `after` may name a later stage, but not one that already runs after this stage through
/// stream order, data accesses or other `after`s: that would be a cycle, and the step could
/// never run. The message walks the path that closes it.
fn after_cycle(cx: &Ctxt, scope: &Scope<'_>, cycle: &Cycle) {
    let Some(stage) = scope.stages.get(cycle.stage.0) else {
        return;
    };
    let Some(named) = stage.after.get(cycle.after) else {
        return;
    };
    cx.error_spanned_by(
        named,
        format!(
            "stage `{}` cannot run after `{named}`, which already runs after it: {}; remove `{named}` from `after`",
            stage.name,
            describe(scope, &cycle.path),
        ),
    );
}

/// `concurrent(a, b, ...)` claims that no two of the stages are ordered. A claim the accesses
/// contradict is an error naming what orders them, so a refactor that serialises two stages
/// by accident fails to compile.
fn concurrent_claims(cx: &Ctxt, scope: &Scope<'_>, pipeline: &lower::Pipeline) {
    for claim in scope.input.claims() {
        let named: Vec<_> = claim.stages.iter().collect();
        for (j, second) in named.iter().enumerate() {
            for first in &named[..j] {
                let (Some(a), Some(b)) = (scope.stage(first), scope.stage(second)) else {
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
                        describe(scope, &path),
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
fn describe(scope: &Scope<'_>, path: &[Hop]) -> String {
    let stage = |id: StageId| {
        scope
            .stages
            .get(id.0)
            .map_or(String::new(), |s| s.name.to_string())
    };
    let hops: Vec<String> = path
        .iter()
        .map(|hop| {
            let (from, to) = (stage(hop.from), stage(hop.to));
            match hop.via {
                Via::Stream(stream) => {
                    let name = scope
                        .streams
                        .get(stream.0)
                        .map_or(String::new(), |s| s.name.to_string());
                    format!("`{to}` follows `{from}` on stream `{name}`")
                }
                Via::Dependency(Reason::After) => format!("`{to}` is declared `after {from}`"),
                Via::Dependency(Reason::Hazard { buffer, hazard }) => {
                    let buffer = scope
                        .buffers
                        .get(buffer.0)
                        .map_or(String::new(), |b| b.name.to_string());
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
