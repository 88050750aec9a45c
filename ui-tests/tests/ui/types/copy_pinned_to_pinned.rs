//! A copy between two pinned buffers is a host-to-host copy, which a stream does not do.

use gpu_pipeline::{PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Mirror {
        streams { main }
        params { input: &PinnedBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage mirror on main {
            copy input -> out;
        }
    }
}

fn main() {}
