//! Pipelines over several devices of one process, run on simulated CPU-backend devices
//! (`Context::cpu_devices`, one race detector over all of them): streams bound to devices,
//! buffers on devices, peer copies between them, and cross-device ordering derived from the
//! accesses like any other, eagerly and replayed from a captured graph.

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

/// CPU implementations of the test kernels (what `runtime/kernels/test_kernels.cu` does).
mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v += value;
        }
    }

    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }
}

gpu_pipeline! {
    /// Each device grows its own half; device 1's half is copied to device 0, which adds it
    /// into its own (`y0 += 2 * from1`); the result is copied back to device 1.
    pub pipeline Halves {
        devices { gpu0, gpu1 }
        streams { main on gpu0, other on gpu1, pull on gpu1 }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32]) cpu = cpu::add_scalar;
            fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) cpu = cpu::saxpy;
        }
        params {
            n: u32,
            y0: &mut DeviceBuffer<f32> on gpu0,
            y1: &mut DeviceBuffer<f32> on gpu1,
        }
        scratch {
            from1: DeviceBuffer<f32> on gpu0 = n as usize,
        }
        stage grow0 on main {
            launch k::add_scalar(n, 1.0, y0) grid n.div_ceil(256) block 256;
        }
        stage grow1 on other {
            launch k::add_scalar(n, 10.0, y1) grid n.div_ceil(256) block 256;
        }
        stage fetch on main {
            copy y1 -> from1;
        }
        stage combine on main {
            launch k::saxpy(n, 2.0, from1, y0) grid n.div_ceil(256) block 256;
        }
        stage publish on pull {
            copy y0 -> y1;
        }
    }
}

#[test]
fn peer_copies_and_kernels_on_two_devices_are_ordered_across_devices() {
    let devices = Context::cpu_checked_devices(2);
    let n = 1000_u32;
    let s0 = Stream::new(&devices[0]).unwrap();
    let s1 = Stream::new(&devices[1]).unwrap();
    let mut y0 = DeviceBuffer::<f32>::zeros(&s0, n as usize).unwrap();
    let mut y1 = DeviceBuffer::<f32>::zeros(&s1, n as usize).unwrap();
    s0.synchronize().unwrap();
    s1.synchronize().unwrap();
    let mut pipeline = Halves::new(&devices[0], &devices[1]).unwrap();
    assert_eq!(pipeline.devices().len(), 2);
    pipeline
        .run(HalvesParams {
            n,
            y0: &mut y0,
            y1: &mut y1,
        })
        .unwrap()
        .wait()
        .unwrap();
    // y0 = 1 + 2 * 10 = 21, copied back to y1.
    assert!(y0.to_vec(&s0).unwrap().iter().all(|&v| v == 21.0));
    assert!(y1.to_vec(&s1).unwrap().iter().all(|&v| v == 21.0));
    {
        let mut graph = pipeline
            .capture(HalvesParams {
                n,
                y0: &mut y0,
                y1: &mut y1,
            })
            .unwrap();
        graph.launch().unwrap();
        graph.synchronize().unwrap();
    }
    // y0 = 21 + 1 + 2 * (21 + 10) = 84.
    assert!(y0.to_vec(&s0).unwrap().iter().all(|&v| v == 84.0));
    assert!(y1.to_vec(&s1).unwrap().iter().all(|&v| v == 84.0));
    assert!(devices[0].races().is_empty(), "{:?}", devices[0].races());
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
