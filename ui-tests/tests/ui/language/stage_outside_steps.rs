//! With `step` blocks every stage belongs to one kind of step.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solver {
        streams { main }
        params { x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        step iterate {
            stage relax on main { fill x = 0.0; }
        }
        stage save on main { copy x -> out; }
    }
}

fn main() {}
