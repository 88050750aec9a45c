//! A host closure receives pinned memory, which the host can read in stream order; a device
//! buffer is copied into a `PinnedBuffer` first.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Inspect {
        streams { main }
        params { x: &DeviceBuffer<f32> }
        stage look on main { host |x: &[f32]| { let _ = x.len(); } reads(x); }
    }
}

fn main() {}
