//! Device arrays on GPUs, in one process: the ring halo exchange of
//! `tests/src/device_ring.rs` over `devices { gpu[2] }`, where each GPU's kernel writes the
//! other's halo buffer directly through peer access (`peer(halos)`), eagerly and replayed
//! from one graph spanning both GPUs, checked exactly against the host reference.
//! `device_arrays.rs` runs the same on simulated CPU-backend devices.

use gpu_pipeline::{Context, Device};
use tests::device_ring;

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_ring_of_two_gpus_writes_the_others_halos_through_peer_access() {
    // Counted first: asking for a device that is not there is an API error that
    // compute-sanitizer reports.
    let count = Device::count().unwrap_or(0);
    if count < 2 {
        return println!("skipped: {count} CUDA device(s) visible, this test needs two");
    }
    let devices = [Context::cuda(0).unwrap(), Context::cuda(1).unwrap()];
    if !devices[0].can_access_peer(&devices[1]).unwrap()
        || !devices[1].can_access_peer(&devices[0]).unwrap()
    {
        // The pipeline must refuse, naming both devices, rather than fault.
        let err = match device_ring::DeviceRing2::new(&devices) {
            Ok(_) => return println!("skipped: GPUs 0 and 1 have no peer access"),
            Err(err) => err,
        };
        return println!("GPUs 0 and 1 have no peer access: {}", err.report());
    }
    // 1000 columns: several blocks per row; 6 rows.
    device_ring::device_ring_2(&devices, 1000, 6);
}
