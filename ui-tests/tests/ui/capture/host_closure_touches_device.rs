//! A host closure runs on the CPU: it may not declare a `DeviceBuffer` in `reads(...)`.
//! Copy the data into a `PinnedBuffer` first and list that.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Report {
        streams { main }
        params { y: &DeviceBuffer<f32> }
        stage report on main {
            host || println!("step done") reads(y);
        }
    }
}

fn main() {}
