//! Device arrays in one process (`devices { gpu[N] }`) on simulated CPU-backend devices, with
//! the race detector on: a ring halo exchange where each device's kernel writes its
//! neighbours' halo buffers directly (`peer(halos)`), eagerly and replayed, checked against
//! a host reference; the refusal where the topology has no peer access; and what the race
//! detector reports for a hand-written neighbour write that nothing orders. The pipelines are
//! in `tests/src/device_ring.rs`; `gpu_device_arrays.rs` runs them on GPUs.

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream};
use tests::device_ring;

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

fn devices<const N: usize>() -> [Context; N] {
    Context::cpu_checked_devices(N)
        .try_into()
        .unwrap_or_else(|_| unreachable!("cpu_checked_devices makes N devices"))
}

/// Three devices: every device's kernel writes both neighbours' halos; the neighbours' reads
/// wait for those writes (events across devices), the next step's writes for the reads.
#[test]
fn a_ring_of_three_devices_writes_its_neighbours_halos_through_peer_access() {
    device_ring::device_ring_3(&devices::<3>(), 8, 4);
}

/// Four devices, a wider block: the same, eagerly and replayed, race detector clean.
#[test]
fn a_ring_of_four_devices_writes_its_neighbours_halos_through_peer_access() {
    device_ring::device_ring_4(&devices::<4>(), 300, 5);
}

/// Two devices: each is both neighbours of the other.
#[test]
fn a_ring_of_two_devices_writes_both_halos_of_the_other() {
    device_ring::device_ring_2(&devices::<2>(), 16, 3);
}

/// Where the topology has no peer access between two neighbours, the first launch that
/// needs it is refused with an error that names both devices, and nothing touches the
/// other device's memory.
#[test]
fn a_ring_where_two_neighbours_have_no_peer_access_is_refused_naming_both() {
    let devices: [Context; 3] = Context::cpu_checked_devices_without_peer_access(3, &[(0, 2)])
        .try_into()
        .unwrap_or_else(|_| unreachable!());
    let streams: Vec<Stream> = devices.iter().map(|d| Stream::new(d).unwrap()).collect();
    let alloc = |len: usize| -> Vec<DeviceBuffer<f32>> {
        streams
            .iter()
            .map(|s| DeviceBuffer::<f32>::zeros(s, len).unwrap())
            .collect()
    };
    let (mut fields, mut halos) = (alloc(8), alloc(4));
    for s in &streams {
        s.synchronize().unwrap();
    }
    let mut ring = device_ring::DeviceRing3::new(&devices).unwrap();
    let params = device_ring::DeviceRing3Params {
        nx: 2,
        rows: 4,
        fields: &mut fields,
        halos: &mut halos,
    };
    let err = match ring.run(params) {
        Ok(guard) => guard.wait().unwrap_err(),
        Err(err) => err,
    };
    let text = err.report().to_string();
    assert!(text.contains("no peer access"), "{text}");
    assert!(
        (text.contains("device 0") && text.contains("device 2")),
        "{text}"
    );
    assert!(text.contains("halos"), "{text}");
}

/// What the race detector reports for the hand-written version of the exchange with the
/// ordering left out: device 0's kernel writes device 1's halo through peer access while
/// device 1's kernel reads it, with no event between them.
#[test]
fn the_race_detector_sees_a_neighbours_halo_written_with_nothing_ordering_its_read() {
    use gpu_pipeline::{HostKernel, LaunchConfig, Module, TypedKernel};
    type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
    let devices = Context::cpu_checked_devices(2);
    assert!(devices[0].enable_peer_access(&devices[1]).unwrap());
    let (s0, s1) = (
        Stream::new(&devices[0]).unwrap(),
        Stream::new(&devices[1]).unwrap(),
    );
    let edge = DeviceBuffer::from_slice(&s0, &[1.0f32; 4]).unwrap();
    let mut halo = DeviceBuffer::<f32>::zeros(&s1, 4)
        .unwrap()
        .named("halo of device 1");
    let mut field = DeviceBuffer::<f32>::zeros(&s1, 4).unwrap();
    s0.synchronize().unwrap();
    s1.synchronize().unwrap();
    let saxpy = |ctx: &Context| -> TypedKernel<Saxpy> {
        let module = Module::load_ptx(ctx, PTX).unwrap().named("test_kernels");
        // SAFETY: saxpy(unsigned n, float a, const float* x, float* y) indexes x and y below
        // n, and every launch here passes n equal to both lengths.
        unsafe { module.function("saxpy").unwrap().typed::<Saxpy>() }
            .unwrap()
            .with_host(HostKernel::new(tests::multi::cpu::saxpy))
    };
    let (on0, on1) = (saxpy(&devices[0]), saxpy(&devices[1]));
    let config = LaunchConfig::for_elements(4, 256);
    // Device 0 writes device 1's halo; device 1 reads it, unordered.
    on0.launch(&s0, config, (4u32, 1.0f32, &edge, &mut halo))
        .unwrap();
    on1.launch(&s1, config, (4u32, 0.5f32, &halo, &mut field))
        .unwrap();
    s0.synchronize().unwrap();
    let first = s1.synchronize().and_then(|()| s0.synchronize());
    let err = first.unwrap_err();
    assert!(matches!(err, Error::Cpu(_)), "{err}");
    assert!(err.to_string().contains("halo of device 1"), "{err}");
    // With device 0's event between them, the same exchange is ordered.
    on0.launch(&s0, config, (4u32, 1.0f32, &edge, &mut halo))
        .unwrap();
    let written = s0.record().unwrap();
    s1.wait_event(&written).unwrap();
    on1.launch(&s1, config, (4u32, 0.5f32, &halo, &mut field))
        .unwrap();
    s1.synchronize().unwrap();
    s0.synchronize().unwrap();
}
