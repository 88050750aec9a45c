//! The stream and event surface. Ordering is proven with flag cells the host releases: work
//! behind a `wait_value_32` cannot run until the host writes the flag, so anything observed
//! before that proves what waits on what.
//!
//! Each shared scenario runs twice: on the host backend in checked mode (in CI) and on CUDA
//! device 0 (ignored without a GPU). CUDA-only surface (attributes, raw handles, devices)
//! has CUDA-only tests.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use gpu_pipeline::{
    AccessPolicyWindow, AccessProperty, Backend, CaptureMode, CaptureStatus, Context, Device,
    DeviceAttribute, Error, Event, EventFlags, FlagCell, MemOp, Stream, StreamAttribute,
    StreamAttributeId, StreamFlags, SyncPolicy, WaitCondition,
};

fn ctx() -> Context {
    Context::cuda(0).expect("a CUDA device")
}

/// Runs each scenario `fn name(ctx: &Context)` on both backends.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod host {
            $(
                #[test]
                fn $name() {
                    let ctx = gpu_pipeline::Context::host_checked();
                    super::$name(&ctx);
                    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
                }
            )*
        }
        mod cuda {
            $(
                #[test]
                #[ignore = "needs a CUDA GPU"]
                fn $name() {
                    super::$name(&super::ctx());
                }
            )*
        }
    };
}

on_both_backends!(
    creation_flags_priorities_and_queries,
    is_complete_and_synchronize_follow_a_gated_stream,
    wait_event_orders_one_stream_after_another,
    wait_on_another_stream_and_reused_events,
    waiting_on_an_event_of_a_destroyed_stream_works,
    host_functions_run_in_stream_order_and_panics_are_reported,
    legacy_callbacks_receive_the_status,
    stream_memory_operations_write_and_wait,
    capture_records_instead_of_running_and_always_ends,
    a_second_stream_joins_a_capture_through_an_event,
    events_time_work_and_refuse_without_timing,
    streams_and_events_are_send_and_sync,
);

/// Polls `cond` for up to two seconds.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(1));
    }
    false
}

/// Holds `stream` until the returned flag is set to 1 by the host.
fn gate(ctx: &Context, stream: &Stream) -> FlagCell<u32> {
    let flag = FlagCell::<u32>::new(ctx, 0).unwrap();
    stream
        .wait_value_32(&flag, WaitCondition::GreaterOrEqual, 1)
        .unwrap();
    flag
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_and_context_properties() {
    assert!(Device::count().unwrap() >= 1);
    let device = Device::get(0).unwrap();
    assert!(!device.name().unwrap().is_empty());
    let (major, _) = device.compute_capability().unwrap();
    assert!(major >= 7, "compute capability {major}");
    assert!(device.total_memory().unwrap() > 1 << 30);
    assert!(
        device
            .attribute(DeviceAttribute::MULTIPROCESSOR_COUNT)
            .unwrap()
            > 0
    );
    let ctx = ctx();
    assert_eq!(ctx.backend(), Backend::Cuda);
    assert_eq!(ctx.device(), Some(device));
    let range = ctx.stream_priority_range().unwrap();
    assert!(range.greatest < range.least, "{range:?}");
    // An ordinal past the last device is the driver's invalid-device error, not a panic.
    if tests::skip_under_compute_sanitizer("asks for a device that does not exist") {
        return;
    }
    let err = Device::get(10_000).unwrap_err();
    assert_eq!(
        err.code(),
        Some(gpu_pipeline::sys::CUresult::CUDA_ERROR_INVALID_DEVICE),
        "{err}"
    );
}

fn creation_flags_priorities_and_queries(ctx: &Context) {
    let ctx = ctx.clone();
    let default = Stream::new(&ctx).unwrap();
    let non_blocking = Stream::non_blocking(&ctx).unwrap();
    assert!(!default.is_nonblocking().unwrap());
    assert!(non_blocking.is_nonblocking().unwrap());
    assert_eq!(
        Stream::with_flags(&ctx, StreamFlags { non_blocking: true })
            .unwrap()
            .flags()
            .unwrap(),
        StreamFlags { non_blocking: true }
    );
    assert_ne!(default.id(), non_blocking.id());
    assert_eq!(default.context().device(), ctx.device());

    let range = ctx.stream_priority_range().unwrap();
    let high = Stream::with_priority(&ctx, StreamFlags::default(), range.greatest).unwrap();
    assert_eq!(high.priority().unwrap(), range.greatest);
    assert_eq!(default.priority().unwrap(), range.least);
    // Out of range is clamped as the driver does, and the clamped value reads back.
    let clamped =
        Stream::with_priority(&ctx, StreamFlags::default(), range.greatest - 100).unwrap();
    assert_eq!(
        clamped.priority().unwrap(),
        range.clamp(range.greatest - 100)
    );
    let low = Stream::with_priority(&ctx, StreamFlags::default(), range.least + 100).unwrap();
    assert_eq!(low.priority().unwrap(), range.least);
    clamped.close().unwrap();
}

fn is_complete_and_synchronize_follow_a_gated_stream(ctx: &Context) {
    let ctx = ctx.clone();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let flag = gate(&ctx, &stream);
    assert!(!stream.is_complete().unwrap());
    flag.store(1);
    stream.synchronize().unwrap();
    assert!(stream.is_complete().unwrap());
}

fn wait_event_orders_one_stream_after_another(ctx: &Context) {
    let ctx = ctx.clone();
    let a = Stream::non_blocking(&ctx).unwrap();
    let b = Stream::non_blocking(&ctx).unwrap();
    let flag = gate(&ctx, &a);
    let done = FlagCell::<u32>::new(&ctx, 0).unwrap();
    let event = a.record().unwrap();
    b.wait_event(&event).unwrap();
    b.write_value_32(&done, 7).unwrap();
    // `b` must not pass its wait while `a` is held.
    thread::sleep(Duration::from_millis(50));
    assert_eq!(done.load(), 0);
    assert!(!event.query().unwrap());
    flag.store(1);
    b.synchronize().unwrap();
    assert_eq!(done.load(), 7);
    assert!(event.query().unwrap());
}

fn wait_on_another_stream_and_reused_events(ctx: &Context) {
    let ctx = ctx.clone();
    let a = Stream::non_blocking(&ctx).unwrap();
    let b = Stream::non_blocking(&ctx).unwrap();
    let done = FlagCell::<u32>::new(&ctx, 0).unwrap();
    for round in 1..=3_u32 {
        let flag = gate(&ctx, &a);
        b.join(&a).unwrap();
        b.write_value_32(&done, round).unwrap();
        thread::sleep(Duration::from_millis(20));
        assert_eq!(done.load(), round - 1, "round {round}: b ran before a");
        flag.store(1);
        b.synchronize().unwrap();
        assert_eq!(done.load(), round);
    }
    // record_into moves one event forward.
    let event = Event::with_flags(&ctx, EventFlags::ORDERING).unwrap();
    a.record_into(&event).unwrap();
    a.record_into(&event).unwrap();
    event.synchronize().unwrap();
    assert!(event.query().unwrap());
}

fn waiting_on_an_event_of_a_destroyed_stream_works(ctx: &Context) {
    let ctx = ctx.clone();
    let event = {
        let short_lived = Stream::non_blocking(&ctx).unwrap();
        short_lived.record().unwrap()
    };
    let other = Stream::non_blocking(&ctx).unwrap();
    other.wait_event(&event).unwrap();
    other.synchronize().unwrap();
    assert!(event.query().unwrap());
}

fn host_functions_run_in_stream_order_and_panics_are_reported(ctx: &Context) {
    let ctx = ctx.clone();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let flag = gate(&ctx, &stream);
    for i in 0..5 {
        let log = log.clone();
        stream
            .launch_host_func(move || log.lock().unwrap().push(i))
            .unwrap();
    }
    thread::sleep(Duration::from_millis(20));
    assert!(
        log.lock().unwrap().is_empty(),
        "host functions ran before the gate opened"
    );
    flag.store(1);
    stream.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3, 4]);

    stream
        .launch_host_func(|| panic!("host closure failed"))
        .unwrap();
    let err = stream.synchronize().unwrap_err();
    match &err {
        Error::HostPanic {
            stream: id,
            message,
            ..
        } => {
            assert_eq!(*id, stream.id());
            assert!(message.contains("host closure failed"), "{message}");
        }
        other => panic!("expected HostPanic, got {other:?}"),
    }
    // The panic is reported once; the stream stays usable.
    let log2 = log.clone();
    stream
        .launch_host_func(move || log2.lock().unwrap().push(99))
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(log.lock().unwrap().last(), Some(&99));
}

fn legacy_callbacks_receive_the_status(ctx: &Context) {
    let ctx = ctx.clone();
    let stream = Stream::new(&ctx).unwrap();
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    stream
        .add_callback(move |status| *seen2.lock().unwrap() = Some(status.is_ok()))
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(true));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn attributes_read_back_and_copy() {
    let ctx = ctx();
    let a = Stream::non_blocking(&ctx).unwrap();
    let b = Stream::non_blocking(&ctx).unwrap();
    a.set_attribute(StreamAttribute::SynchronizationPolicy(
        SyncPolicy::BlockingSync,
    ))
    .unwrap();
    assert_eq!(
        a.get_attribute(StreamAttributeId::SynchronizationPolicy)
            .unwrap(),
        StreamAttribute::SynchronizationPolicy(SyncPolicy::BlockingSync)
    );
    let cell = FlagCell::<u64>::new(&ctx, 0).unwrap();
    let window = AccessPolicyWindow {
        base: cell.device_address().unwrap(),
        num_bytes: 8,
        hit_ratio: 0.5,
        hit_property: AccessProperty::Persisting,
        miss_property: AccessProperty::Streaming,
    };
    a.set_attribute(StreamAttribute::AccessPolicyWindow(window))
        .unwrap();
    assert_eq!(
        a.get_attribute(StreamAttributeId::AccessPolicyWindow)
            .unwrap(),
        StreamAttribute::AccessPolicyWindow(window)
    );
    b.copy_attributes_from(&a).unwrap();
    assert_eq!(
        b.get_attribute(StreamAttributeId::SynchronizationPolicy)
            .unwrap(),
        StreamAttribute::SynchronizationPolicy(SyncPolicy::BlockingSync)
    );
    let range = ctx.stream_priority_range().unwrap();
    let high = Stream::with_priority(&ctx, StreamFlags::default(), range.greatest).unwrap();
    assert_eq!(
        high.get_attribute(StreamAttributeId::Priority).unwrap(),
        StreamAttribute::Priority(range.greatest)
    );
}

fn stream_memory_operations_write_and_wait(ctx: &Context) {
    let ctx = ctx.clone();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let c32 = FlagCell::<u32>::new(&ctx, 0).unwrap();
    let c64 = FlagCell::<u64>::new(&ctx, 0).unwrap();
    stream.write_value_32(&c32, 41).unwrap();
    stream.write_value_64(&c64, 1 << 40).unwrap();
    stream.synchronize().unwrap();
    assert_eq!((c32.load(), c64.load()), (41, 1 << 40));

    // A 64-bit wait holds later writes until the host writes the awaited value.
    let go = FlagCell::<u64>::new(&ctx, 0).unwrap();
    stream.wait_value_64(&go, WaitCondition::Equal, 5).unwrap();
    stream.write_value_32(&c32, 42).unwrap();
    go.store(4);
    thread::sleep(Duration::from_millis(30));
    assert_eq!(c32.load(), 41, "wait EQ 5 passed at 4");
    go.store(5);
    stream.synchronize().unwrap();
    assert_eq!(c32.load(), 42);

    // A batch runs in order: wait on a mask, then two writes.
    let mask = FlagCell::<u32>::new(&ctx, 0).unwrap();
    stream
        .batch_mem_op(&[
            MemOp::WaitValue32 {
                cell: &mask,
                condition: WaitCondition::And,
                value: 0b100,
            },
            MemOp::WriteValue32 {
                cell: &c32,
                value: 43,
            },
            MemOp::WriteValue64 {
                cell: &c64,
                value: 7,
            },
        ])
        .unwrap();
    mask.store(0b011);
    thread::sleep(Duration::from_millis(30));
    assert_eq!(c32.load(), 42, "AND wait passed without the bit");
    mask.store(0b100);
    stream.synchronize().unwrap();
    assert_eq!((c32.load(), c64.load()), (43, 7));
    stream
        .wait_value_32(&c32, WaitCondition::GreaterOrEqual, 43)
        .unwrap();
    stream.synchronize().unwrap();
}

fn capture_records_instead_of_running_and_always_ends(ctx: &Context) {
    let ctx = ctx.clone();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let cell = FlagCell::<u32>::new(&ctx, 0).unwrap();
    assert!(!stream.is_capturing().unwrap());
    stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
    assert!(matches!(
        stream.capture_status().unwrap(),
        CaptureStatus::Active { .. }
    ));
    stream.write_value_32(&cell, 9).unwrap();
    let ran = Arc::new(Mutex::new(0));
    let ran2 = ran.clone();
    stream
        .launch_host_fn(Arc::new(move || *ran2.lock().unwrap() += 1))
        .unwrap();
    // A FnOnce cannot be replayed, so it is refused during capture.
    let refused = stream.launch_host_func(|| ()).unwrap_err();
    assert!(refused.to_string().contains("launch_host_fn"), "{refused}");
    let graph = stream.end_capture().unwrap();
    assert!(!stream.is_capturing().unwrap());
    assert_eq!(
        graph.node_count().unwrap(),
        2,
        "one memory operation and one host node"
    );
    stream.synchronize().unwrap();
    assert_eq!(cell.load(), 0, "captured work must not run");
    assert_eq!(*ran.lock().unwrap(), 0);

    // The closure form ends the capture when the body fails, and returns the body's error.
    let err = stream
        .capture(CaptureMode::ThreadLocal, |s| {
            s.write_value_32(&cell, 1)?;
            Err(Error::InvalidArgument {
                call: "test body",
                message: "body failed".into(),
            })
        })
        .unwrap_err();
    assert!(err.to_string().contains("body failed"));
    assert!(!stream.is_capturing().unwrap());
    // ... and when it panics.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = stream.capture(CaptureMode::ThreadLocal, |_| panic!("inside capture"));
    }));
    assert!(panicked.is_err());
    assert!(!stream.is_capturing().unwrap());
    let graph = stream
        .capture(CaptureMode::Global, |s| s.write_value_32(&cell, 3))
        .unwrap();
    assert_eq!(graph.node_count().unwrap(), 1);
}

fn a_second_stream_joins_a_capture_through_an_event(ctx: &Context) {
    let ctx = ctx.clone();
    let origin = Stream::non_blocking(&ctx).unwrap();
    let side = Stream::non_blocking(&ctx).unwrap();
    let cell = FlagCell::<u32>::new(&ctx, 0).unwrap();
    origin.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let fork = origin.record().unwrap();
    side.wait_event(&fork).unwrap();
    assert!(side.is_capturing().unwrap());
    side.write_value_32(&cell, 1).unwrap();
    origin.join(&side).unwrap();
    let graph = origin.end_capture().unwrap();
    assert!(!side.is_capturing().unwrap());
    assert!(graph.node_count().unwrap() >= 1);
    assert_eq!(cell.load(), 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn raw_handles_and_devices() {
    let ctx = ctx();
    let stream = Stream::non_blocking(&ctx).unwrap();
    assert!(stream.handle().is_some_and(|h| !h.is_null()));
    assert_eq!(stream.device().unwrap(), Device::get(0).unwrap());
    assert!(
        stream
            .record()
            .unwrap()
            .handle()
            .is_some_and(|h| !h.is_null())
    );
}

#[test]
fn cuda_only_calls_say_so_on_the_host_backend() {
    let ctx = Context::host();
    let stream = Stream::non_blocking(&ctx).unwrap();
    assert!(stream.handle().is_none());
    for err in [
        stream.device().map(|_| ()).unwrap_err(),
        stream
            .get_attribute(StreamAttributeId::Priority)
            .map(|_| ())
            .unwrap_err(),
        // SAFETY: never dereferenced: the host backend refuses raw handles up front.
        unsafe { Stream::from_handle(&ctx, std::ptr::null_mut()) }
            .map(|_| ())
            .unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::BackendMismatch { backend: "cpu", .. }),
            "{err:?}"
        );
    }
    assert_eq!(ctx.backend(), Backend::Cpu);
    assert_eq!(ctx.device(), None);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn borrowed_streams_are_not_destroyed() {
    let ctx = ctx();
    let owner = Stream::non_blocking(&ctx).unwrap();
    {
        // SAFETY: `owner` outlives the borrowed wrapper and belongs to `ctx`.
        let borrowed = unsafe { Stream::from_handle(&ctx, owner.handle().unwrap()) }.unwrap();
        assert!(borrowed.is_borrowed());
        assert_eq!(borrowed.id(), owner.id());
        borrowed.synchronize().unwrap();
    }
    // Still valid after the borrowed wrapper dropped.
    let cell = FlagCell::<u32>::new(&ctx, 0).unwrap();
    owner.write_value_32(&cell, 5).unwrap();
    owner.synchronize().unwrap();
    assert_eq!(cell.load(), 5);
    owner.close().unwrap();
}

fn events_time_work_and_refuse_without_timing(ctx: &Context) {
    let ctx = ctx.clone();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let start = stream.record().unwrap();
    stream
        .launch_host_func(|| thread::sleep(Duration::from_millis(30)))
        .unwrap();
    let end = stream.record().unwrap();
    end.synchronize().unwrap();
    let ms = Event::elapsed_time(&start, &end).unwrap();
    assert!((25.0..2000.0).contains(&ms), "{ms} ms");
    assert_eq!(start.elapsed_until(&end).unwrap(), ms);

    let untimed = Event::with_flags(&ctx, EventFlags::ORDERING).unwrap();
    stream.record_into(&untimed).unwrap();
    let err = Event::elapsed_time(&start, &untimed).unwrap_err();
    assert!(err.to_string().contains("disable_timing"), "{err}");
    let blocking = Event::with_flags(
        &ctx,
        EventFlags {
            disable_timing: false,
            blocking_sync: true,
        },
    )
    .unwrap();
    assert!(blocking.flags().blocking_sync);
    stream.record_into(&blocking).unwrap();
    blocking.synchronize().unwrap();
    assert!(blocking.query().unwrap());
}

fn streams_and_events_are_send_and_sync(ctx: &Context) {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Stream>();
    assert_send_sync::<Event>();
    assert_send_sync::<Context>();
    assert_send_sync::<FlagCell<u32>>();
    // Enqueue onto one stream from several threads.
    let ctx = ctx.clone();
    let stream = Arc::new(Stream::non_blocking(&ctx).unwrap());
    let count = Arc::new(Mutex::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (stream, count) = (stream.clone(), count.clone());
            thread::spawn(move || {
                for _ in 0..25 {
                    let count = count.clone();
                    stream
                        .launch_host_func(move || *count.lock().unwrap() += 1)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    stream.synchronize().unwrap();
    assert!(eventually(|| *count.lock().unwrap() == 100));
}

/// `join` is cudarc's name for waiting on another stream; the earlier `wait(&Stream)` still
/// works, deprecated, with the same meaning.
#[test]
fn cpu_join_orders_like_the_deprecated_wait() {
    let ctx = Context::cpu_checked();
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let mut data = gpu_pipeline::DeviceBuffer::<u32>::zeros(&a, 64).unwrap();
    a.memset_u32(&mut data, 1).unwrap();
    b.join(&a).unwrap();
    b.memset_u32(&mut data, 2).unwrap();
    #[allow(deprecated)]
    a.wait(&b).unwrap();
    a.memset_u32(&mut data, 3).unwrap();
    assert_eq!(data.to_vec(&a).unwrap(), vec![3; 64]);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

/// A host function that enqueues work is refused on the CPU backend as CUDA refuses it (a
/// host function must make no CUDA call), so such a program fails in CI, not first on a GPU.
#[test]
fn a_host_function_cannot_enqueue_work() {
    let ctx = Context::cpu();
    let stream = Stream::new(&ctx).unwrap();
    let other = Arc::new(Stream::new(&ctx).unwrap());
    let mut data = gpu_pipeline::DeviceBuffer::<u32>::zeros(&stream, 4).unwrap();
    stream.synchronize().unwrap();
    let (sent, received) = std::sync::mpsc::channel();
    let inside = other.clone();
    stream
        .launch_host_func(move || {
            let enqueued = inside.memset_u32(&mut data, 5);
            sent.send((enqueued.map_err(|e| e.to_string()), data))
                .unwrap();
        })
        .unwrap();
    stream.synchronize().unwrap();
    let (enqueued, data) = received.recv().unwrap();
    let err = enqueued.expect_err("an enqueue inside a host function");
    assert!(err.contains("host function"), "{err}");
    other.synchronize().unwrap();
    assert_eq!(data.to_vec(&other).unwrap(), [0; 4], "nothing was enqueued");
}
