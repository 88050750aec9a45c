//! A stage on a stream array says which of its streams it runs on: `on work[i % n]`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Chunks {
        streams { main, work[4] }
        params { x: &mut DeviceBuffer<f32> }
        stage clear on work { fill x = 0.0; }
    }
}

fn main() {}
