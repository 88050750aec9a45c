//! Lowering: accesses, the emitted waits and their reasons, events, fork and join.

use super::*;
use crate::lower::{Access, Edge, Hazard, Mode, Reason};

/// A pipeline with three streams and four device buffers, with `stages` as its body.
fn graph(stages: &str) -> Pipeline<'static> {
    lower_ok(&format!(
        "pipeline G {{
            streams {{ s1, s2, s3 }}
            params {{
                x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>,
                z: &mut DeviceBuffer<f32>, w: &mut DeviceBuffer<f32>,
            }}
            {stages}
        }}"
    ))
}

/// The emitted waits by stage name.
fn waits<'p>(pipeline: &'p Pipeline<'_>) -> Vec<(&'p str, &'p str)> {
    pipeline
        .edges
        .iter()
        .map(|edge| {
            (
                pipeline.stages[edge.from.0].name.as_str(),
                pipeline.stages[edge.to.0].name.as_str(),
            )
        })
        .collect()
}

fn names(pipeline: &Pipeline<'_>, ids: &[StageId]) -> Vec<String> {
    ids.iter()
        .map(|id| pipeline.stages[id.0].name.clone())
        .collect()
}

fn hazard(id: usize, hazard: Hazard) -> Reason {
    Reason::Hazard {
        buffer: buffer(id),
        hazard,
    }
}

#[test]
fn a_read_after_write_across_streams_is_one_wait() {
    let p = graph(
        "stage a on s1 { call f() writes(x); }
         stage b on s2 { call g() reads(x); }",
    );
    assert_eq!(
        p.edges,
        [Edge {
            from: stage(0),
            to: stage(1),
            reasons: vec![hazard(0, Hazard::ReadAfterWrite)]
        }]
    );
    assert_eq!(p.dependencies, p.edges);
    // `b` records an event only for the join: the origin waits for it at the end of the step.
    assert_eq!(names(&p, &p.events), ["a", "b"]);
    assert_eq!(p.fork, [], "`b` already runs after `a`, an origin stage");
    assert_eq!(p.join, [stream(1)]);
}

#[test]
fn accesses_merge_per_stage_with_writes_covering_reads() {
    let p = graph("stage a on s1 { call f() reads(x, y); call g() writes(x); fill z = 0; }");
    assert_eq!(
        p.stages[0].accesses,
        [
            Access::whole(buffer(0), Mode::Write),
            Access::whole(buffer(1), Mode::Read),
            Access::whole(buffer(2), Mode::Write),
        ]
    );
}

#[test]
fn write_after_read_and_write_after_write_order_too() {
    let p = graph(
        "stage a on s1 { call f() reads(x); }
         stage b on s2 { call g() writes(x); }
         stage c on s3 { call h() writes(x); }",
    );
    assert_eq!(waits(&p), [("a", "b"), ("b", "c")]);
    assert_eq!(p.edges[0].reasons, [hazard(0, Hazard::WriteAfterRead)]);
    assert_eq!(p.edges[1].reasons, [hazard(0, Hazard::WriteAfterWrite)]);
    // `a -> c` (WAR on `x`) is required but implied through `b`.
    assert_eq!(p.dependencies.len(), 3);
}

#[test]
fn one_wait_lists_every_reason() {
    let p = graph(
        "stage a on s1 { call f() reads(y) writes(x); }
         stage b on s2 { call g() reads(x) writes(y); }
         stage c on s2 after a { call g() reads(z); }",
    );
    assert_eq!(
        p.edges[0].reasons,
        [
            hazard(0, Hazard::ReadAfterWrite),
            hazard(1, Hazard::WriteAfterRead)
        ]
    );
    // `c` is declared `after a`, which `b` and stream order already imply.
    assert_eq!(waits(&p), [("a", "b")]);
    assert_eq!(p.dependencies[1].reasons, [Reason::After]);
}

#[test]
fn stream_order_implies_a_dependency_on_an_earlier_stage() {
    // a(s1) -> b(s2) -> c(s1): c touches what a wrote, but a precedes c on s1 anyway.
    let p = graph(
        "stage a on s1 { call f() writes(x); }
         stage b on s2 { call g() reads(x) writes(y); }
         stage c on s1 { call f() reads(y) writes(x); }",
    );
    assert_eq!(waits(&p), [("a", "b"), ("b", "c")]);
    assert_eq!(names(&p, &p.events), ["a", "b"]);
    assert_eq!(
        (p.fork.clone(), p.join.clone()),
        (vec![], vec![]),
        "s2 ends before the origin's `c`"
    );

    // On the source side: a and b on s1 both feed c on s2; only b's wait is needed.
    let p = graph(
        "stage a on s1 { call f() writes(x); }
         stage b on s1 { call f() writes(y); }
         stage c on s2 { call g() reads(x, y); }",
    );
    assert_eq!(waits(&p), [("b", "c")]);
}

#[test]
fn a_direct_wait_a_diamond_implies_is_dropped() {
    let p = graph(
        "stage a on s1 { call f() writes(x); }
         stage b on s2 { call g() reads(x) writes(y); }
         stage c on s3 { call h() reads(x) writes(z); }
         stage d on s3 { call h() reads(y, z); }",
    );
    // a -> c is needed (c's only way to a); a -> d is implied by a -> b -> d and by c on s3.
    assert_eq!(waits(&p), [("a", "b"), ("a", "c"), ("b", "d")]);
    assert_eq!(
        p.join,
        [stream(2)],
        "s2's `b` reaches `d`, so joining s3 covers both"
    );
    assert_eq!(names(&p, &p.events), ["a", "b", "d"]);
}

#[test]
fn after_adds_a_wait_no_access_implies() {
    let p = graph(
        "stage a on s1 { call f() writes(x); }
         stage b on s2 after a { call g() writes(y); }",
    );
    assert_eq!(
        p.edges,
        [Edge {
            from: stage(0),
            to: stage(1),
            reasons: vec![Reason::After]
        }]
    );
}

#[test]
fn same_stream_conflicts_need_nothing() {
    let p = graph(
        "stage a on s1 { call f() writes(x); }
         stage b on s1 { call f() reads(x) writes(x); }
         stage c on s1 after a { call f() writes(x); }",
    );
    assert!(p.dependencies.is_empty() && p.edges.is_empty() && p.events.is_empty());
    assert!(
        p.fork.is_empty() && p.join.is_empty(),
        "unused streams take no part"
    );
}

#[test]
fn independent_streams_fork_from_and_join_to_the_origin() {
    let p = graph(
        "stage a on s1 { call f() writes(x); }
         stage b on s2 { call g() writes(y); }
         stage c on s3 { call h() reads(y); }",
    );
    assert_eq!(waits(&p), [("b", "c")]);
    assert_eq!(p.fork, [stream(1)], "s3 is reached through `b`");
    assert_eq!(p.join, [stream(2)], "s2 is joined through `c`");
    assert_eq!(names(&p, &p.events), ["b", "c"]);
}

#[test]
fn an_origin_without_stages_still_forks_and_joins() {
    let p = graph(
        "stage a on s2 { call g() writes(x); }
         stage b on s3 { call h() writes(y); }",
    );
    assert_eq!(
        (p.fork.clone(), p.join.clone()),
        (vec![stream(1), stream(2)], vec![stream(1), stream(2)])
    );
}

#[test]
fn the_enqueue_order_is_program_order_where_free() {
    let p = graph(
        "stage a on s1 after c { call f() writes(x); }
         stage b on s2 { call g() writes(y); }
         stage c on s3 { call h() writes(z); }
         stage d on s1 { call f() reads(x, y); }",
    );
    assert_eq!(names(&p, &p.order), ["b", "c", "a", "d"]);
}

#[test]
fn statements_keep_their_source_and_resolved_targets() {
    use crate::lower::{Arg, KernelParamKind, StatementKind};
    let p = lower_ok(HEAT);
    let step = &p.stages[0];
    let StatementKind::Launch {
        source,
        kernel,
        args,
    } = &step.statements[0].kind
    else {
        panic!()
    };
    let ast::Statement::Launch(written) = &step.decl.statements[0] else {
        panic!()
    };
    assert!(std::ptr::eq(*source, &**written), "the launch as written");
    let kernel = &p.kernels[kernel.0];
    assert_eq!(kernel.name, "stencil");
    assert_eq!(kernel.host.as_deref(), Some("crate::heat_host::stencil"));
    assert_eq!(
        kernel.params[4].kind,
        KernelParamKind::Slice {
            elem: "f32".into(),
            mode: Mode::Write,
            bound: None,
        }
    );
    assert_eq!(
        args[4],
        Arg::Buffer {
            buffer: buffer(1),
            mode: Mode::Write
        }
    );
    assert_eq!(p.streams[0].marker, "HeatStepCompute");
    assert!(p.streams[1].non_blocking);
    assert_eq!(p.buffers[4].name, "tmp");
    assert!(p.buffers[4].scratch);
    assert_eq!(p.scalars.len(), 3);
}
