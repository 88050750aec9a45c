//! `step % 4 == 4` never holds: a remainder of `% 4` is 0 to 3 (issue 23, class 2).

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Snapshots {
        streams { main }
        params { field: &DeviceBuffer<f32>, snapshot: &mut PinnedBuffer<f32> }
        stage save on main {
            if step % 4 == 4 {
                copy field -> snapshot;
            }
        }
    }
}

fn main() {}
