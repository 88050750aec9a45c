//! A host closure's parameters are buffers it declares: list `snapshot` in `reads(...)`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Inspect {
        streams { main }
        params { x: &DeviceBuffer<f32>, snapshot: &mut PinnedBuffer<f32> }
        stage save on main { copy x -> snapshot; }
        stage look on main { host |snapshot: &[f32]| { let _ = snapshot.len(); }; }
    }
}

fn main() {}
