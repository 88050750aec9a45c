//! `fill` sets device memory with a memset in stream order; a `PinnedBuffer` is host memory.

use gpu_pipeline::{PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { out: &mut PinnedBuffer<f32> }
        stage clear on main {
            fill out = 0.0;
        }
    }
}

fn main() {}
