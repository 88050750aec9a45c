//! `after` may not close a cycle: `upload` follows `download` on stream `copy`, so
//! `download` cannot also run after `upload`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline RoundTrip {
        streams { compute, copy }
        params { y: &mut DeviceBuffer<f32>, z: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage clear on compute {
            fill z = 0.0;
        }
        stage download on copy after upload {
            copy y -> out;
        }
        stage upload on copy {
            copy out -> z;
        }
    }
}

fn main() {}
