//! The CPU backend blocks the host when a stream's queue is full, as CUDA does when its launch
//! queue fills: a million replays without a synchronize cost bounded memory instead of a
//! queue that grows by about 200 bytes a launch (214 MB for a million, then an abort on a
//! failed allocation for a long enough loop).
//!
//! One test in its own binary, so that the process's peak resident memory is its alone.

use gpu_pipeline::{CaptureMode, Context, DeviceBuffer, Stream};

/// The process's peak resident set (`VmHWM`), in bytes.
fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmHWM line");
    kib * 1024
}

#[test]
fn a_million_replays_without_a_synchronize_stay_under_64_mb() {
    const REPLAYS: u32 = 1_000_000;
    let ctx = Context::cpu();
    let stream = Stream::new(&ctx).unwrap();
    let mut cell = DeviceBuffer::<u32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |s| s.memset_u32(&mut cell, 7))
        .unwrap();
    let exec = graph.instantiate().unwrap();
    let before = peak_resident_bytes();
    for _ in 0..REPLAYS {
        exec.launch(&stream).unwrap();
    }
    // Most replays have run by now: the host was held back while the queue was full.
    let queued_peak = peak_resident_bytes();
    stream.synchronize().unwrap();
    assert_eq!(cell.to_vec(&stream).unwrap(), [7]);
    let limit = 64 << 20;
    assert!(
        queued_peak < limit,
        "peak resident memory {} MB after {REPLAYS} queued replays (it was {} MB before them)",
        queued_peak >> 20,
        before >> 20
    );
}
