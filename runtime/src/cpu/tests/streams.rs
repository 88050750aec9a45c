//! Streams and events in eager execution: ordering, completion, timing, faults and shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use super::{Gate, Log, bounded, context, stream};
use crate::cpu::{CpuFault, Event, EventOptions, Op, StreamOptions};

#[test]
fn one_stream_runs_in_enqueue_order() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let log = Log::default();
        for i in 0..100 {
            let log = log.clone();
            s.enqueue(Op::once(format!("op {i}"), move || {
                log.push(i.to_string());
                Ok(())
            }))
            .unwrap();
        }
        s.synchronize().unwrap();
        let expected: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        assert_eq!(log.entries(), expected);
    });
}

#[test]
fn event_wait_orders_work_across_streams() {
    bounded(|| {
        let ctx = context(false);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let event = ctx.create_event(EventOptions::default());
        let log = Log::default();
        a.enqueue(log.op("slow on a", 100)).unwrap();
        a.record(&event).unwrap();
        b.wait(&event).unwrap();
        b.enqueue(log.op("after wait on b", 0)).unwrap();
        b.synchronize().unwrap();
        assert_eq!(log.entries(), ["slow on a", "after wait on b"]);
        // `b` ran past the wait, so the point was reached; `a` itself may still be counting it.
        assert!(event.query());
        a.synchronize().unwrap();
        assert!(a.query());
    });
}

#[test]
fn streams_without_events_run_concurrently() {
    // `a` blocks until `b` opens its gate: this finishes only if `b` does not wait for `a`.
    bounded(|| {
        let ctx = context(false);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let mut gate = Gate::new();
        a.enqueue(gate.op()).unwrap();
        let open = gate.open.clone();
        b.enqueue(Op::once("open", move || {
            open.send(()).map_err(|e| e.to_string())
        }))
        .unwrap();
        a.synchronize().unwrap();
        b.synchronize().unwrap();
    });
}

#[test]
fn wait_stream_orders_after_the_other_streams_work() {
    bounded(|| {
        let ctx = context(false);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let log = Log::default();
        a.enqueue(log.op("a", 80)).unwrap();
        b.wait_stream(&a).unwrap();
        b.enqueue(log.op("b", 0)).unwrap();
        b.synchronize().unwrap();
        assert_eq!(log.entries(), ["a", "b"]);
    });
}

#[test]
fn query_and_synchronize_track_completion() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let event = ctx.create_event(EventOptions::default());
        assert!(s.query(), "an empty stream is complete");
        let mut gate = Gate::new();
        s.enqueue(gate.op()).unwrap();
        s.record(&event).unwrap();
        assert!(!s.query());
        assert!(!event.query());
        gate.open();
        event.synchronize().unwrap();
        assert!(event.query());
        s.synchronize().unwrap();
        assert!(s.query());
    });
}

#[test]
fn elapsed_time_covers_a_known_sleep() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let (start, end) = (
            ctx.create_event(EventOptions::default()),
            ctx.create_event(EventOptions::default()),
        );
        s.record(&start).unwrap();
        s.enqueue(Op::once("sleep", || {
            thread::sleep(Duration::from_millis(50));
            Ok(())
        }))
        .unwrap();
        s.record(&end).unwrap();
        s.synchronize().unwrap();
        let ms = Event::elapsed_time(&start, &end).unwrap();
        assert!(ms >= 49.99, "elapsed {ms} ms");
        let back = Event::elapsed_time(&end, &start).unwrap();
        assert!(back <= -49.99, "reversed {back} ms");
    });
}

#[test]
fn elapsed_time_errors_like_cuda() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let untimed = ctx.create_event(EventOptions {
            name: Some("untimed".into()),
            timing: false,
        });
        let (start, end) = (
            ctx.create_event(EventOptions::default()),
            ctx.create_event(EventOptions::default()),
        );
        s.record(&start).unwrap();
        s.synchronize().unwrap();
        let never = Event::elapsed_time(&start, &end);
        assert!(matches!(never, Err(CpuFault::EventNotRecorded { .. })));
        s.record(&untimed).unwrap();
        let untimed_result = Event::elapsed_time(&start, &untimed);
        assert!(
            matches!(untimed_result, Err(CpuFault::EventTimingDisabled { event }) if &*event == "untimed")
        );
        let mut gate = Gate::new();
        s.enqueue(gate.op()).unwrap();
        s.record(&end).unwrap();
        let pending = Event::elapsed_time(&start, &end);
        assert!(matches!(pending, Err(CpuFault::EventNotReady { .. })));
        gate.open();
        s.synchronize().unwrap();
        assert!(Event::elapsed_time(&start, &end).is_ok());
    });
}

#[test]
fn waiting_on_an_unrecorded_event_is_a_no_op() {
    bounded(|| {
        let ctx = context(true);
        let s = stream(&ctx, "s");
        let event = ctx.create_event(EventOptions::default());
        assert!(event.query());
        event.synchronize().unwrap();
        s.wait(&event).unwrap();
        let log = Log::default();
        s.enqueue(log.op("ran", 0)).unwrap();
        s.synchronize().unwrap();
        assert_eq!(log.entries(), ["ran"]);
    });
}

#[test]
fn a_panicking_op_is_reported_and_the_stream_stays_usable() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "compute");
        let log = Log::default();
        s.enqueue(Op::replayable("launch stencil", || {
            panic!("index out of bounds: 9")
        }))
        .unwrap();
        s.enqueue(log.op("after the panic", 0)).unwrap();
        let fault = s.synchronize().unwrap_err();
        match &fault {
            CpuFault::OpPanicked {
                stream,
                op,
                message,
                ..
            } => {
                assert_eq!((&**stream, &**op), ("compute", "launch stencil"));
                assert_eq!(message, "index out of bounds: 9");
            }
            other => panic!("unexpected fault {other:?}"),
        }
        assert!(
            fault
                .to_string()
                .contains("`launch stencil` on stream `compute` panicked")
        );
        assert_eq!(log.entries(), ["after the panic"]);
        s.synchronize().unwrap();
        s.enqueue(log.op("later", 0)).unwrap();
        s.synchronize().unwrap();
        assert_eq!(log.entries(), ["after the panic", "later"]);
    });
}

#[test]
fn a_failing_op_reports_its_message_once() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        s.enqueue(Op::replayable("first", || Err("bad input".into())))
            .unwrap();
        s.enqueue(Op::replayable("second", || Err("also bad".into())))
            .unwrap();
        let fault = s.synchronize().unwrap_err();
        assert!(
            matches!(&fault, CpuFault::OpFailed { op, message, .. } if &**op == "first" && message == "bad input")
        );
        s.synchronize().unwrap();
    });
}

#[test]
fn dropping_a_stream_finishes_its_queued_work() {
    bounded(|| {
        let ctx = context(false);
        let s = stream(&ctx, "s");
        let done = Arc::new(AtomicUsize::new(0));
        s.enqueue(Op::once("slow", || {
            thread::sleep(Duration::from_millis(50));
            Ok(())
        }))
        .unwrap();
        for _ in 0..10 {
            let done = done.clone();
            s.enqueue(Op::once("count", move || {
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }))
            .unwrap();
        }
        // The drop returns at once (as `cuStreamDestroy` does); the work still runs, and
        // the context's synchronize waits for it.
        drop(s);
        assert!(
            done.load(Ordering::SeqCst) < 10,
            "the drop waited for the slow op"
        );
        ctx.synchronize().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 10);
    });
}

#[test]
fn dropping_the_context_with_work_in_flight_is_fine() {
    bounded(|| {
        let ctx = context(true);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let event = ctx.create_event(EventOptions::default());
        let log = Log::default();
        a.enqueue(log.op("a", 50)).unwrap();
        a.record(&event).unwrap();
        b.wait(&event).unwrap();
        b.enqueue(log.op("b", 0)).unwrap();
        drop(ctx);
        drop(event);
        b.synchronize().unwrap();
        drop(a);
        drop(b);
        assert_eq!(log.entries(), ["a", "b"]);
    });
}

#[test]
fn a_stream_dropped_by_its_own_op_drains_without_deadlock() {
    bounded(|| {
        let ctx = context(false);
        let slot = Arc::new(Mutex::new(None));
        let s = stream(&ctx, "s");
        let (ran, ran_rx) = mpsc::channel();
        let owner = slot.clone();
        // The gate keeps the drop op from running before the stream is in the slot.
        let mut gate = Gate::new();
        s.enqueue(gate.op()).unwrap();
        s.enqueue(Op::once("drop own stream", move || {
            drop(owner.lock().map_err(|e| e.to_string())?.take());
            Ok(())
        }))
        .unwrap();
        s.enqueue(Op::once("after the drop", move || {
            ran.send(()).map_err(|e| e.to_string())
        }))
        .unwrap();
        *slot.lock().unwrap() = Some(s);
        gate.open();
        ran_rx.recv().unwrap();
        assert!(slot.lock().unwrap().is_none());
    });
}

#[test]
fn synchronizing_inside_an_op_is_a_fault_not_a_deadlock() {
    bounded(|| {
        let ctx = context(false);
        let s = Arc::new(stream(&ctx, "s"));
        let (result, result_rx) = mpsc::channel();
        let inner = s.clone();
        s.enqueue(Op::once("sync self", move || {
            let _ = result.send(inner.synchronize());
            Ok(())
        }))
        .unwrap();
        let fault = result_rx.recv().unwrap().unwrap_err();
        assert!(matches!(fault, CpuFault::BlockingCallInsideOp { .. }));
        s.synchronize().unwrap();
    });
}

#[test]
fn context_synchronize_covers_every_stream() {
    bounded(|| {
        let ctx = context(false);
        let (a, b) = (stream(&ctx, "a"), stream(&ctx, "b"));
        let log = Log::default();
        a.enqueue(log.op("a", 30)).unwrap();
        b.enqueue(Op::replayable("b fails", || Err("nope".into())))
            .unwrap();
        let fault = ctx.synchronize().unwrap_err();
        assert!(matches!(fault, CpuFault::OpFailed { .. }));
        assert!(a.query() && b.query());
        assert_eq!(log.entries(), ["a"]);
    });
}

#[test]
fn stream_options_are_recorded_and_priority_clamped() {
    bounded(|| {
        let ctx = context(false);
        let (least, greatest) = ctx.priority_range();
        let s = ctx
            .create_stream(StreamOptions {
                name: Some("copy".into()),
                priority: -100,
                non_blocking: true,
            })
            .unwrap();
        assert_eq!(s.priority(), greatest);
        assert!(greatest <= least);
        assert!(s.is_non_blocking());
        assert_eq!(s.name(), "copy");
        let other = ctx.create_stream(StreamOptions::default()).unwrap();
        assert_ne!(s.id(), other.id());
        assert!(other.name().starts_with("stream #"));
    });
}

#[test]
fn events_of_another_context_are_rejected() {
    bounded(|| {
        let (one, two) = (context(false), context(false));
        let s = stream(&one, "s");
        let foreign = two.create_event(EventOptions::default());
        assert!(matches!(
            s.record(&foreign),
            Err(CpuFault::ForeignEvent { .. })
        ));
        assert!(matches!(
            s.wait(&foreign),
            Err(CpuFault::ForeignEvent { .. })
        ));
    });
}
