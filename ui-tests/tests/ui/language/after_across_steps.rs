//! Steps run in the order they are enqueued, so `after` relates stages of one step.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solver {
        streams { main, copy }
        params { x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        step iterate {
            stage relax on main { fill x = 0.0; }
        }
        step finish {
            stage save on copy after relax { copy x -> out; }
        }
    }
}

fn main() {}
