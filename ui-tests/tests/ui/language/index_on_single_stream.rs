//! A single stream takes no index: `on main`, not `on main[0]`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Chunks {
        streams { main }
        params { x: &mut DeviceBuffer<f32> }
        stage clear on main[0] { fill x = 0.0; }
    }
}

fn main() {}
