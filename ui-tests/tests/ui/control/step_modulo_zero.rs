//! `step % 0` has no value: refused when the program compiles (issue 23, class 2), not when
//! the step runs. Write a `k` of 1 or more.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Snapshots {
        streams { main }
        params { field: &DeviceBuffer<f32>, snapshot: &mut PinnedBuffer<f32> }
        stage save on main {
            if step % 0 == 0 {
                copy field -> snapshot;
            }
        }
    }
}

fn main() {}
