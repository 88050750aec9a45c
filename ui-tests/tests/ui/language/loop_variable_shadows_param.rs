//! The loop variable names nothing else: `for n in 0..n` would hide the param `n` in the
//! loop's stages.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Chunks {
        streams { main, work[2] }
        params { n: usize, x: &mut DeviceBuffer<f32> }
        for n in 0..n {
            stage clear on work[n % 2] { fill x[n..n + 1] = 0.0; }
        }
    }
}

fn main() {}
