//! Dropping a buffer does not stall unrelated streams when its uses allow a stream-ordered
//! free: a temporary allocated on stream `b` with `Stream::alloc_async`, used only there and
//! dropped in a loop, is freed in `b`'s order while stream `a` is held busy by a host function
//! that waits for the test to release it. If a drop synchronized the context, it would wait
//! for `a`, which waits for the test: the loop would stall until `a`'s wait times out.
//!
//! The second test shows the other side of the rule: a buffer whose address was handed out
//! (`device_ptr`) may be in use anywhere, so its drop still waits for every stream.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpu_pipeline::{Backend, Context, DeviceBuffer, PinnedBuffer, Stream};

/// Holds `stream` busy until the returned sender sends (or drops), at most `limit`.
fn hold(stream: &Stream, limit: Duration) -> mpsc::Sender<()> {
    let (release, wait) = mpsc::channel::<()>();
    stream
        .launch_host_func(move || {
            let _ = wait.recv_timeout(limit);
        })
        .unwrap();
    release
}

const ELEMENTS: usize = 1 << 16;
const ROUNDS: u32 = 200;

fn temporaries_dropped_in_a_loop_do_not_wait_for_other_streams(ctx: &Context) {
    let a = Stream::non_blocking(ctx).unwrap();
    let b = Stream::non_blocking(ctx).unwrap();
    let mut sum = DeviceBuffer::<u32>::zeros(&b, ELEMENTS).unwrap();
    let mut out = PinnedBuffer::<u32>::zeros(ctx, ELEMENTS).unwrap();
    b.synchronize().unwrap();

    // `a` is busy for up to 30 s, until released below.
    let release = hold(&a, Duration::from_secs(30));
    let start = Instant::now();
    for round in 0..ROUNDS {
        // A temporary of one time step: allocated, filled, read and dropped on `b` only.
        let mut temp = b.alloc_async::<u32>(ELEMENTS).unwrap();
        b.memset_u32(&mut temp, round).unwrap();
        b.copy_dtod(&temp, &mut sum).unwrap();
        drop(temp);
    }
    b.copy_dtoh(&sum, &mut out).unwrap();
    b.synchronize().unwrap();
    let looped = start.elapsed();

    // The loop, and `b`'s work, finished while `a` was still held: no drop waited for it.
    assert!(
        !a.is_complete().unwrap(),
        "stream `a` completed during the loop: a drop synchronized the context ({looped:?})"
    );
    assert!(looped < Duration::from_secs(20), "the loop took {looped:?}");
    assert!(out.as_slice().unwrap().iter().all(|&v| v == ROUNDS - 1));
    release.send(()).unwrap();
    a.synchronize().unwrap();
    eprintln!(
        "{ROUNDS} temporaries allocated, used and dropped in {looped:?} while another stream was busy"
    );
}

fn a_buffer_whose_address_escaped_waits_for_every_stream(ctx: &Context) {
    let a = Stream::non_blocking(ctx).unwrap();
    let b = Stream::non_blocking(ctx).unwrap();
    let mut temp = b.alloc_async::<u32>(ELEMENTS).unwrap();
    b.memset_u32(&mut temp, 7).unwrap();
    // Handed out: some library could be using it on any stream now.
    let _address = temp.device_ptr();
    let held = Duration::from_millis(500);
    let release = hold(&a, held);
    let start = Instant::now();
    drop(temp);
    let waited = start.elapsed();
    // The drop waited for `a` (which ran out its hold), not only for `b`.
    assert!(
        a.is_complete().unwrap(),
        "the drop did not wait for stream `a`"
    );
    assert!(waited >= held / 2, "the drop returned after {waited:?}");
    drop(release);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_temporaries_dropped_in_a_loop_do_not_wait_for_other_streams() {
    let ctx = Context::cuda(0).unwrap();
    temporaries_dropped_in_a_loop_do_not_wait_for_other_streams(&ctx);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_buffer_whose_address_escaped_waits_for_every_stream() {
    let ctx = Context::cuda(0).unwrap();
    assert_eq!(ctx.backend(), Backend::Cuda);
    a_buffer_whose_address_escaped_waits_for_every_stream(&ctx);
}

/// The CPU backend defers frees to its queues anyway; the loop runs there too.
#[test]
fn cpu_temporaries_dropped_in_a_loop_do_not_wait_for_other_streams() {
    let ctx = Context::cpu_checked();
    temporaries_dropped_in_a_loop_do_not_wait_for_other_streams(&ctx);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}
