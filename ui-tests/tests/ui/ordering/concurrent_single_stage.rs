//! `concurrent(...)` is a claim about two or more stages; one stage claims nothing.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
        }
        concurrent(clear);
    }
}

fn main() {}
