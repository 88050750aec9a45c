//! A constant range is checked when the program compiles: `x[8..4]` ends before it starts.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline One {
        streams { main }
        params { x: &mut DeviceBuffer<f32> }
        stage clear on main { fill x[8..4] = 0.0; }
    }
}

fn main() {}
