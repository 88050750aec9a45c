//! A pinned scratch buffer read by a host closure before anything writes it: its contents are
//! what the last step left (zeros at first), as for a device scratch buffer.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Snapshot {
        streams { main }
        params { field: &DeviceBuffer<f32> }
        scratch { snap: PinnedBuffer<f32> = 8 }
        stage report on main {
            host |snap: &PinnedBuffer<f32>| { let _ = snap; } reads(snap);
            copy field -> snap;
        }
    }
}

fn main() {
    let _: Option<PinnedBuffer<f32>> = None;
}
