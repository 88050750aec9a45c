//! The first stream is the origin every step starts and ends on, so it cannot be an array;
//! declare a single stream first.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Chunks {
        streams { work[4], copy }
        params { x: &mut DeviceBuffer<f32> }
        stage clear on copy { fill x = 0.0; }
    }
}

fn main() {}
