//! Capture, instantiation, replay and updates of graphs.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use super::{Gate, Log, bounded, context, stream};
use crate::cpu::{CpuFault, EventOptions, Graph, KernelArgValue, KernelFn, KernelTag, Op, Stream};
use crate::launch::config::LaunchConfig;

/// A kernel tag for tests (any kernel id, one block).
fn tag() -> KernelTag {
    KernelTag {
        kernel: 1,
        config: crate::launch::config::LaunchConfig::new(1, 1),
        in_call: false,
    }
}

/// A replayable op applying `f` to a shared value.
fn update(value: &Arc<Mutex<i64>>, label: &'static str, f: fn(i64) -> i64) -> Op {
    let value = value.clone();
    Op::replayable(label, move || {
        let mut v = value.lock().map_err(|e| e.to_string())?;
        *v = f(*v);
        Ok(())
    })
}

/// A kernel adding its one scalar argument to `total`.
fn add_kernel(total: &Arc<AtomicI64>) -> KernelFn {
    let total = total.clone();
    Arc::new(move |_: &LaunchConfig, args: &[KernelArgValue]| {
        let amount = args
            .first()
            .and_then(KernelArgValue::as_scalar::<i64>)
            .ok_or("expected one i64 argument")?;
        total.fetch_add(amount, Ordering::SeqCst);
        Ok(())
    })
}

fn capture_one(s: &Stream, op: Op) -> Graph {
    s.begin_capture().unwrap();
    s.enqueue(op).unwrap();
    s.end_capture().unwrap()
}

#[test]
fn single_stream_capture_replays_in_order() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let value = Arc::new(Mutex::new(0));
        s.begin_capture().unwrap();
        assert!(s.is_capturing());
        s.enqueue(update(&value, "add 2", |v| v + 2)).unwrap();
        s.enqueue(update(&value, "times 3", |v| v * 3)).unwrap();
        let graph = s.end_capture().unwrap();
        assert!(!s.is_capturing());
        s.synchronize().unwrap();
        assert_eq!(*value.lock().unwrap(), 0, "capture must not run anything");
        assert_eq!(graph.node_count(), 2);
        assert_eq!(graph.nodes()[1].dependencies(), [0]);
        let exec = graph.instantiate();
        for _ in 0..3 {
            s.launch(&exec).map(drop).unwrap();
        }
        s.synchronize().unwrap();
        // ((0 + 2) * 3 + 2) * 3 ... three times: 6, 24, 78.
        assert_eq!(*value.lock().unwrap(), 78);
    });
}

#[test]
fn a_replay_is_ordered_between_surrounding_work() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let log = Log::default();
        let graph = capture_one(&s, log.op("replay", 0));
        let exec = graph.instantiate();
        s.enqueue(log.op("before", 50)).unwrap();
        s.launch(&exec).map(drop).unwrap();
        s.enqueue(log.op("after", 0)).unwrap();
        s.synchronize().unwrap();
        assert_eq!(log.entries(), ["before", "replay", "after"]);
    });
}

#[test]
fn fork_join_capture_across_two_streams() {
    bounded(|| {
        let ctx = context(false);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let (fork, join) = (
            ctx.create_event(EventOptions::default()),
            ctx.create_event(EventOptions::default()),
        );
        let log = Log::default();
        a.begin_capture().unwrap();
        a.enqueue(log.op("a1", 0)).unwrap();
        a.record(&fork).unwrap();
        b.wait(&fork).unwrap();
        assert!(
            b.is_capturing(),
            "waiting on a captured event joins the capture"
        );
        b.enqueue(log.op("b1", 20)).unwrap();
        a.enqueue(log.op("a2", 0)).unwrap();
        b.record(&join).unwrap();
        a.wait(&join).unwrap();
        a.enqueue(log.op("a3", 0)).unwrap();
        let graph = a.end_capture().unwrap();
        assert!(!b.is_capturing());
        let deps: Vec<Vec<usize>> = graph
            .nodes()
            .iter()
            .map(|n| n.dependencies().to_vec())
            .collect();
        assert_eq!(deps, vec![vec![], vec![0], vec![0], vec![2, 1]]);
        assert_eq!(graph.nodes()[1].captured_on(), "b");
        let dot = graph.to_dot();
        assert!(
            dot.contains("n1 -> n3;") && dot.contains("n2 -> n3;"),
            "{dot}"
        );
        let c = stream(&ctx, "c");
        let exec = graph.instantiate();
        c.launch(&exec).map(drop).unwrap();
        c.launch(&exec).map(drop).unwrap();
        c.synchronize().unwrap();
        let entries = log.entries();
        assert_eq!(entries.len(), 8);
        for replay in entries.chunks(4) {
            assert_eq!(replay[0], "a1");
            assert_eq!(replay[3], "a3");
        }
        // The streams work eagerly again after the capture.
        b.enqueue(log.op("eager b", 0)).unwrap();
        b.synchronize().unwrap();
        assert_eq!(log.entries().last().map(String::as_str), Some("eager b"));
    });
}

#[test]
fn unjoined_fork_fails_the_capture() {
    bounded(|| {
        let ctx = context(false);
        let (a, b) = (stream(&ctx, "origin"), stream(&ctx, "side"));
        let fork = ctx.create_event(EventOptions::default());
        let log = Log::default();
        a.begin_capture().unwrap();
        a.record(&fork).unwrap();
        b.wait(&fork).unwrap();
        b.enqueue(log.op("side work", 0)).unwrap();
        a.enqueue(log.op("origin work", 0)).unwrap();
        assert!(matches!(
            b.end_capture(),
            Err(CpuFault::NotCaptureOrigin { origin, .. }) if &*origin == "origin"
        ));
        let fault = a.end_capture().unwrap_err();
        match &fault {
            CpuFault::CaptureUnjoined { origin, unjoined } => {
                assert_eq!(&**origin, "origin");
                assert_eq!(unjoined.iter().map(|s| &**s).collect::<Vec<_>>(), ["side"]);
            }
            other => panic!("unexpected fault {other:?}"),
        }
        assert!(!a.is_capturing() && !b.is_capturing());
        a.synchronize().unwrap();
        b.synchronize().unwrap();
        assert!(log.entries().is_empty());
    });
}

#[test]
fn a_one_shot_op_cannot_be_captured() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        s.begin_capture().unwrap();
        let rejected = s.enqueue(Op::once("host fn", || Ok(())));
        assert!(
            matches!(&rejected, Err(CpuFault::OneShotInCapture { op, .. }) if &**op == "host fn")
        );
        // Refused before it became part of the capture, which stays valid.
        let graph = s.end_capture().unwrap();
        assert_eq!(graph.node_count(), 0);
        assert!(!s.is_capturing());
    });
}

#[test]
fn illegal_calls_during_capture_invalidate_it() {
    bounded(|| {
        let ctx = context(false);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        a.begin_capture().unwrap();
        assert!(matches!(
            a.begin_capture(),
            Err(CpuFault::AlreadyCapturing { .. })
        ));
        assert!(matches!(
            a.synchronize(),
            Err(CpuFault::NotAllowedInCapture { .. })
        ));
        assert!(matches!(
            a.end_capture(),
            Err(CpuFault::CaptureInvalidated { .. })
        ));

        let eager = ctx.create_event(EventOptions::default());
        b.record(&eager).unwrap();
        a.begin_capture().unwrap();
        assert!(matches!(
            a.wait(&eager),
            Err(CpuFault::CaptureIsolation { .. })
        ));
        assert!(a.end_capture().is_err());
        assert!(matches!(
            a.end_capture(),
            Err(CpuFault::NotCapturing { .. })
        ));

        // An event recorded in an ended capture has no eager point.
        let captured = ctx.create_event(EventOptions::default());
        a.begin_capture().unwrap();
        a.record(&captured).unwrap();
        a.end_capture().unwrap();
        assert!(matches!(
            b.wait(&captured),
            Err(CpuFault::EventInCapture { .. })
        ));
        assert!(matches!(
            captured.synchronize(),
            Err(CpuFault::EventInCapture { .. })
        ));
    });
}

#[test]
fn kernel_args_updated_between_replays_change_the_result() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let total = Arc::new(AtomicI64::new(0));
        let kernel = Op::kernel(
            "add",
            add_kernel(&total),
            vec![KernelArgValue::scalar(5i64)],
            tag(),
        );
        s.begin_capture().unwrap();
        s.enqueue(kernel).unwrap();
        s.enqueue(Op::replayable("host node", || Ok(()))).unwrap();
        let graph = s.end_capture().unwrap();
        let mut exec = graph.instantiate();
        s.launch(&exec).map(drop).unwrap();
        s.synchronize().unwrap();
        assert_eq!(total.load(Ordering::SeqCst), 5);

        // A launch queued before the update keeps the arguments it was launched with.
        let mut gate = Gate::new();
        s.enqueue(gate.op()).unwrap();
        s.launch(&exec).map(drop).unwrap();
        exec.set_kernel_args(
            0,
            vec![KernelArgValue::scalar(100i64)],
            crate::launch::config::LaunchConfig::new(1, 1),
        )
        .unwrap();
        s.launch(&exec).map(drop).unwrap();
        gate.open();
        s.synchronize().unwrap();
        assert_eq!(total.load(Ordering::SeqCst), 5 + 5 + 100);
        assert_eq!(
            exec.kernel_args(0).unwrap()[0].as_scalar::<i64>(),
            Some(100)
        );

        assert!(matches!(
            exec.set_kernel_args(1, vec![], crate::launch::config::LaunchConfig::new(1, 1)),
            Err(CpuFault::NotAKernelNode { index: 1, .. })
        ));
        assert!(matches!(
            exec.set_kernel_args(7, vec![], crate::launch::config::LaunchConfig::new(1, 1)),
            Err(CpuFault::NodeOutOfRange { index: 7, count: 2 })
        ));
    });
}

#[test]
fn whole_graph_update_needs_the_same_topology() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let value = Arc::new(Mutex::new(0));
        let first = capture_one(&s, update(&value, "add 1", |v| v + 1));
        let second = capture_one(&s, update(&value, "add 10", |v| v + 10));
        let mut exec = first.instantiate();
        s.launch(&exec).map(drop).unwrap();
        exec.update(&second).unwrap();
        s.launch(&exec).map(drop).unwrap();
        s.synchronize().unwrap();
        assert_eq!(*value.lock().unwrap(), 11);

        s.begin_capture().unwrap();
        s.enqueue(update(&value, "x", |v| v)).unwrap();
        s.enqueue(update(&value, "y", |v| v)).unwrap();
        let bigger = s.end_capture().unwrap();
        let fault = exec.update(&bigger).unwrap_err();
        assert!(matches!(fault, CpuFault::GraphTopologyMismatch { .. }));
        let total = Arc::new(AtomicI64::new(0));
        let kernel_graph = capture_one(
            &s,
            Op::kernel(
                "k",
                add_kernel(&total),
                vec![KernelArgValue::scalar(1i64)],
                tag(),
            ),
        );
        assert!(matches!(
            exec.update(&kernel_graph),
            Err(CpuFault::GraphTopologyMismatch { .. })
        ));
    });
}

#[test]
fn launching_a_graph_on_a_capturing_stream_captures_its_nodes() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let value = Arc::new(Mutex::new(1));
        s.begin_capture().unwrap();
        s.enqueue(update(&value, "inner double", |v| v * 2))
            .unwrap();
        s.enqueue(update(&value, "inner add 1", |v| v + 1)).unwrap();
        let inner = s.end_capture().unwrap().instantiate();
        s.begin_capture().unwrap();
        s.enqueue(update(&value, "outer times 10", |v| v * 10))
            .unwrap();
        s.launch(&inner).map(drop).unwrap();
        s.enqueue(update(&value, "outer minus 3", |v| v - 3))
            .unwrap();
        let outer = s.end_capture().unwrap();
        let deps: Vec<Vec<usize>> = outer
            .nodes()
            .iter()
            .map(|n| n.dependencies().to_vec())
            .collect();
        assert_eq!(deps, vec![vec![], vec![0], vec![1], vec![2]]);
        s.launch(&outer.instantiate()).unwrap();
        s.synchronize().unwrap();
        // Starting from 1: times 10, then the inner graph (double, add 1), then minus 3.
        assert_eq!(*value.lock().unwrap(), 18);
    });
}

#[test]
fn replay_faults_name_the_failing_node() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let log = Log::default();
        s.begin_capture().unwrap();
        s.enqueue(Op::replayable("broken node", || Err("bad".into())))
            .unwrap();
        s.enqueue(log.op("next node", 0)).unwrap();
        let exec = s.end_capture().unwrap().instantiate();
        s.launch(&exec).map(drop).unwrap();
        let fault = s.synchronize().unwrap_err();
        assert!(matches!(&fault, CpuFault::OpFailed { op, .. } if &**op == "broken node"));
        assert_eq!(log.entries(), ["next node"]);
    });
}
