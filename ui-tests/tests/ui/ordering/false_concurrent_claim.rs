//! `concurrent(produce, consume)` claims the two stages are unordered, but `consume` reads
//! `y` after `produce` writes it, so it waits for it: the claim is false.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { compute, copy }
        params { y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage produce on compute {
            fill y = 1.0;
        }
        stage consume on copy {
            copy y -> out;
        }
        concurrent(produce, consume);
    }
}

fn main() {}
