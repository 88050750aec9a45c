//! Dropping a stream whose queued work still waits (here on a flag the host writes later)
//! returns at once and the work completes afterwards, as `cuStreamDestroy` does on CUDA. The
//! CPU backend's drop joined the stream's worker, so it waited for the host's own later write:
//! a hang from safe code that no GPU has.

use std::sync::mpsc;
use std::time::Duration;

use gpu_pipeline::{Context, DeviceBuffer, FlagCell, PinnedBuffer, Stream, WaitCondition};

fn a_dropped_stream_finishes_its_work_without_the_drop_waiting(ctx: &Context) {
    let setup = Stream::new(ctx).unwrap();
    let value = DeviceBuffer::from_slice(&setup, &[5u32]).unwrap();
    let mut out = PinnedBuffer::<u32>::zeros(ctx, 1).unwrap();
    let go = FlagCell::<u32>::new(ctx, 0).unwrap();
    let stream = Stream::new(ctx).unwrap();
    stream
        .wait_value_32(&go, WaitCondition::GreaterOrEqual, 1)
        .unwrap();
    stream.copy_dtoh(&value, &mut out).unwrap();
    let (dropped, returned) = mpsc::channel();
    let dropper = std::thread::spawn(move || {
        drop(stream);
        dropped.send(()).unwrap();
    });
    let returned = returned.recv_timeout(Duration::from_secs(10)).is_ok();
    // Lets the queued work run in any case, so that the test ends either way.
    go.store(1);
    dropper.join().unwrap();
    assert!(
        returned,
        "dropping the stream waited for its queued work, which waits on the host"
    );
    // The work still ran: the copy landed (reading pinned memory waits for it).
    assert_eq!(out.to_vec().unwrap(), [5]);
}

#[test]
fn cpu_a_dropped_stream_finishes_its_work_without_the_drop_waiting() {
    a_dropped_stream_finishes_its_work_without_the_drop_waiting(&Context::cpu_checked());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_dropped_stream_finishes_its_work_without_the_drop_waiting() {
    a_dropped_stream_finishes_its_work_without_the_drop_waiting(
        &Context::cuda(0).expect("a CUDA device"),
    );
}
