//! The race detector on hand-written cases: each hazard with and without the right event,
//! host accesses, and graphs.

use super::{bounded, context, stream};
use crate::cpu::{Access, Context, CpuFault, EventOptions, Hazard, Op, RaceReport, Stream};

fn noop(label: &'static str) -> Op {
    Op::replayable(label, || Ok(()))
}

/// `first` on stream `compute` then `second` on stream `copy`, both on buffer `field`,
/// optionally ordered by an event. Returns the race faults of each stream and the context's list.
fn two_streams(
    first: Access,
    second: Access,
    event: bool,
) -> (Option<CpuFault>, Option<CpuFault>, Vec<RaceReport>) {
    let ctx = context(true);
    let (compute, copy) = (stream(&ctx, "compute"), stream(&ctx, "copy"));
    let field = ctx.register_buffer("field");
    let done = ctx.create_event(EventOptions::default());
    compute
        .enqueue(noop("first op").access(field, first))
        .unwrap();
    if event {
        compute.record(&done).unwrap();
        copy.wait(&done).unwrap();
    }
    copy.enqueue(noop("second op").access(field, second))
        .unwrap();
    let faults = (compute.synchronize().err(), copy.synchronize().err());
    (faults.0, faults.1, ctx.races())
}

fn check_hazard(first: Access, second: Access, hazard: Hazard) {
    bounded(move || {
        let (on_compute, on_copy, races) = two_streams(first, second, false);
        assert!(
            on_compute.is_none(),
            "the earlier op's stream reports nothing"
        );
        let report = on_copy
            .as_ref()
            .and_then(CpuFault::as_race)
            .expect("a race on `copy`");
        assert_eq!(report.hazard, hazard);
        assert_eq!(&*report.buffer_name, "field");
        assert_eq!(
            (&*report.earlier.op, &*report.earlier.stream),
            ("first op", "compute")
        );
        assert_eq!(
            (&*report.later.op, &*report.later.stream),
            ("second op", "copy")
        );
        assert_eq!(races, vec![report.clone()]);
        let message = report.to_string();
        assert!(
            message.starts_with(&format!("{hazard} race on `field`")),
            "{message}"
        );
        assert!(
            message.contains("`second op` on stream `copy`"),
            "{message}"
        );

        let (on_compute, on_copy, races) = two_streams(first, second, true);
        assert!(on_compute.is_none() && on_copy.is_none() && races.is_empty());
    });
}

#[test]
fn read_after_write_without_event_is_reported() {
    check_hazard(Access::Write, Access::Read, Hazard::ReadAfterWrite);
}

#[test]
fn write_after_read_without_event_is_reported() {
    check_hazard(Access::Read, Access::Write, Hazard::WriteAfterRead);
}

#[test]
fn write_after_write_without_event_is_reported() {
    check_hazard(Access::Write, Access::Write, Hazard::WriteAfterWrite);
}

#[test]
fn concurrent_reads_and_disjoint_buffers_are_not_races() {
    bounded(|| {
        let ctx = context(true);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let (x, y) = (ctx.register_buffer("x"), ctx.register_buffer("y"));
        a.enqueue(noop("read x").reads(x).writes(y)).unwrap();
        b.enqueue(noop("read x too").reads(x)).unwrap();
        a.synchronize().unwrap();
        b.synchronize().unwrap();
        assert!(ctx.races().is_empty());
    });
}

#[test]
fn ordering_is_transitive_through_a_third_stream() {
    bounded(|| {
        let ctx = context(true);
        let (a, b, c) = (stream(&ctx, "a"), stream(&ctx, "b"), stream(&ctx, "c"));
        let x = ctx.register_buffer("x");
        let (ab, bc) = (
            ctx.create_event(EventOptions::default()),
            ctx.create_event(EventOptions::default()),
        );
        a.enqueue(noop("write x").writes(x)).unwrap();
        a.record(&ab).unwrap();
        b.wait(&ab).unwrap();
        b.record(&bc).unwrap();
        c.wait(&bc).unwrap();
        c.enqueue(noop("read x").reads(x)).unwrap();
        c.synchronize().unwrap();
        assert!(ctx.races().is_empty());
    });
}

fn host_case(ctx: &Context, s: &Stream) -> Result<(), CpuFault> {
    let pinned = ctx.register_buffer("snapshot");
    s.enqueue(noop("copy next -> snapshot").writes(pinned))
        .unwrap();
    ctx.host_access("read snapshot", &[(pinned, Access::Read)])
}

#[test]
fn host_access_before_synchronize_is_a_race() {
    bounded(|| {
        let ctx = context(true);
        let s = stream(&ctx, "copy");
        let fault = host_case(&ctx, &s).unwrap_err();
        let report = fault.as_race().unwrap();
        assert_eq!(report.hazard, Hazard::ReadAfterWrite);
        assert_eq!(
            (&*report.later.op, &*report.later.stream),
            ("read snapshot", "host")
        );
        assert_eq!(&*report.earlier.stream, "copy");
        assert_eq!(ctx.races().len(), 1);
    });
}

#[test]
fn host_access_after_synchronize_or_completed_query_is_ordered() {
    bounded(|| {
        let ctx = context(true);
        let s = stream(&ctx, "copy");
        let pinned = ctx.register_buffer("snapshot");
        s.enqueue(noop("copy").writes(pinned)).unwrap();
        s.synchronize().unwrap();
        ctx.host_access("read", &[(pinned, Access::Read)]).unwrap();
        // Host writes happen before work enqueued afterwards.
        ctx.host_access("fill", &[(pinned, Access::Write)]).unwrap();
        s.enqueue(noop("upload").reads(pinned)).unwrap();
        while !s.query() {
            std::thread::yield_now();
        }
        ctx.host_access("overwrite", &[(pinned, Access::Write)])
            .unwrap();
        let event = ctx.create_event(EventOptions::default());
        s.enqueue(noop("copy again").writes(pinned)).unwrap();
        s.record(&event).unwrap();
        event.synchronize().unwrap();
        ctx.host_access("read again", &[(pinned, Access::Read)])
            .unwrap();
        assert!(ctx.races().is_empty());
    });
}

#[test]
fn unchecked_contexts_report_nothing() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "copy");
        host_case(&ctx, &s).unwrap();
        s.synchronize().unwrap();
        assert!(ctx.races().is_empty());
    });
}

#[test]
fn replayed_nodes_race_with_unordered_eager_work() {
    bounded(|| {
        let ctx = context(true);
        let (compute, copy) = (stream(&ctx, "compute"), stream(&ctx, "copy"));
        let field = ctx.register_buffer("field");
        compute.begin_capture().unwrap();
        compute
            .enqueue(noop("launch stencil").writes(field))
            .unwrap();
        let exec = compute.end_capture().unwrap().instantiate();
        compute.launch(&exec).map(drop).unwrap();
        copy.enqueue(noop("copy field -> host").reads(field))
            .unwrap();
        let report = copy.synchronize().unwrap_err();
        let report = report.as_race().unwrap();
        assert_eq!(report.hazard, Hazard::ReadAfterWrite);
        assert_eq!(
            (&*report.earlier.op, &*report.earlier.stream),
            ("launch stencil", "compute")
        );
        compute.synchronize().unwrap();

        // Replays on one stream are ordered with each other and with that stream's work.
        compute.launch(&exec).map(drop).unwrap();
        compute.launch(&exec).map(drop).unwrap();
        compute.enqueue(noop("eager read").reads(field)).unwrap();
        compute.synchronize().unwrap();
        assert_eq!(ctx.races().len(), 1);
    });
}

#[test]
fn unordered_nodes_inside_a_graph_are_reported_once() {
    bounded(|| {
        let ctx = context(true);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let x = ctx.register_buffer("x");
        let (fork, join) = (
            ctx.create_event(EventOptions::default()),
            ctx.create_event(EventOptions::default()),
        );
        a.begin_capture().unwrap();
        a.record(&fork).unwrap();
        b.wait(&fork).unwrap();
        b.enqueue(noop("b writes x").writes(x)).unwrap();
        a.enqueue(noop("a writes x").writes(x)).unwrap();
        b.record(&join).unwrap();
        a.wait(&join).unwrap();
        a.enqueue(noop("a reads x after join").reads(x)).unwrap();
        let exec = a.end_capture().unwrap().instantiate();
        a.launch(&exec).map(drop).unwrap();
        a.launch(&exec).map(drop).unwrap();
        let fault = a.synchronize().unwrap_err();
        let report = fault.as_race().unwrap();
        assert_eq!(report.hazard, Hazard::WriteAfterWrite);
        assert_eq!(
            (&*report.earlier.op, &*report.earlier.stream),
            ("b writes x", "b")
        );
        assert_eq!(
            (&*report.later.op, &*report.later.stream),
            ("a writes x", "a")
        );
        assert_eq!(ctx.races().len(), 1, "{:?}", ctx.races());
    });
}

#[test]
fn kernel_buffer_arguments_declare_accesses() {
    use crate::cpu::{BufferArg, KernelArgValue};
    use std::sync::Arc;
    bounded(|| {
        let ctx = context(true);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let memory = |name: &str| {
            let m =
                crate::cpu::Memory::new(ctx.shared(), 64, crate::cpu::MemoryKind::Device).unwrap();
            m.set_name(name);
            m
        };
        let (src_mem, dst_mem) = (memory("src"), memory("dst"));
        let (src, dst) = (src_mem.id(), dst_mem.id());
        let arg = |memory: &Arc<crate::cpu::Memory>, writable| {
            KernelArgValue::Buffer(BufferArg {
                memory: memory.clone(),
                offset: 0,
                byte_len: 64,
                elem_size: 4,
                writable,
            })
        };
        let tag = crate::cpu::KernelTag {
            kernel: 1,
            config: crate::launch::config::LaunchConfig::new(1, 1),
            in_call: false,
        };
        let kernel = |args| {
            Op::kernel(
                "stencil",
                Arc::new(|_: &crate::launch::config::LaunchConfig, _: &[KernelArgValue]| Ok(())),
                args,
                tag,
            )
        };
        a.enqueue(kernel(vec![arg(&src_mem, false), arg(&dst_mem, true)]))
            .unwrap();
        b.enqueue(noop("read src").reads(src)).unwrap();
        b.synchronize().unwrap();
        b.enqueue(noop("read dst").reads(dst)).unwrap();
        let fault = b.synchronize().unwrap_err();
        assert_eq!(&*fault.as_race().unwrap().buffer_name, "dst");
    });
}
