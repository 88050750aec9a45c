//! A subscript is computed on the host when the step is enqueued; it may read a buffer only
//! as its length.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline One {
        streams { main }
        params { x: &mut DeviceBuffer<f32>, bounds: &DeviceBuffer<u32> }
        stage clear on main { fill x[..bounds.as_view().len()] = 0.0; }
    }
}

fn main() {}
