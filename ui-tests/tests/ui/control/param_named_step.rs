//! A param named `step` beside `if step % k == r`, where `step` is the step counter: the param
//! used to lose silently (issue 23, class 5). Rename the param.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Snapshots {
        streams { main }
        params { step: u32, field: &DeviceBuffer<f32>, snapshot: &mut PinnedBuffer<f32> }
        stage save on main {
            if step % 2 == 0 {
                copy field -> snapshot;
            }
        }
    }
}

fn main() {}
