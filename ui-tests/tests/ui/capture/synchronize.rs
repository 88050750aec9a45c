//! `synchronize` blocks the host and cannot be captured in a graph; stages are ordered by
//! their accesses, and the host waits for a whole step outside the pipeline.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
            synchronize;
        }
    }
}

fn main() {}
