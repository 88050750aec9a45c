//! Pipelines over several devices of one process, run on simulated CPU-backend devices
//! (`Context::cpu_devices`, one race detector over all of them): streams bound to devices,
//! buffers on devices, peer copies between them, and cross-device ordering derived from the
//! accesses like any other, eagerly and replayed from a captured graph. The pipeline is in
//! `tests/src/multi.rs`; `gpu_multi.rs` runs the same on GPUs.

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream};
use tests::multi;

#[test]
fn peer_copies_and_kernels_on_two_devices_are_ordered_across_devices() {
    let devices = Context::cpu_checked_devices(2);
    multi::halves(&devices[0], &devices[1], 1000);
}
/// What the race detector reports when two devices' work touches one buffer with no event
/// between them: a peer copy on device 1 reading what a kernel on device 0 writes.
#[test]
fn the_race_detector_sees_a_race_between_two_devices() {
    let devices = Context::cpu_checked_devices(2);
    let s0 = Stream::new(&devices[0]).unwrap();
    let s1 = Stream::new(&devices[1]).unwrap();
    let mut on0 = DeviceBuffer::<f32>::zeros(&s0, 4).unwrap().named("on0");
    let mut on1 = DeviceBuffer::<f32>::zeros(&s1, 4).unwrap();
    s0.synchronize().unwrap();
    s1.synchronize().unwrap();
    s0.memset_u32(&mut on0, 1.0f32.to_bits()).unwrap();
    s1.copy_peer(&on0, &mut on1).unwrap();
    s0.synchronize().unwrap();
    let err = s1.synchronize().unwrap_err();
    assert!(matches!(err, Error::Cpu(_)), "{err}");
    assert!(err.to_string().contains("on0"), "{err}");
    // With an event from device 0 between them, the same two operations are ordered.
    s0.memset_u32(&mut on0, 2.0f32.to_bits()).unwrap();
    let done = s0.record().unwrap();
    s1.wait_event(&done).unwrap();
    s1.copy_peer(&on0, &mut on1).unwrap();
    s1.synchronize().unwrap();
    assert_eq!(on1.to_vec(&s1).unwrap(), [2.0; 4]);
}

/// A buffer of one device given to a kernel launched on another is refused at run time on
/// both backends (at compile time, `gpu_pipeline!` refuses it: see the ui tests).
#[test]
fn work_of_one_device_cannot_touch_another_devices_memory() {
    let devices = Context::cpu_devices(2);
    let s0 = Stream::new(&devices[0]).unwrap();
    let on1 = DeviceBuffer::<f32>::alloc(&devices[1], 4).unwrap();
    let mut on0 = DeviceBuffer::<f32>::alloc(&devices[0], 4).unwrap();
    let err = s0.copy_dtod(&on1, &mut on0).unwrap_err();
    assert!(matches!(err, Error::ContextMismatch { .. }), "{err}");
}
