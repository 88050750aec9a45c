//! A `send` in one stage and its `recv` in the next: two groups, which every rank runs in
//! the same order, so every rank sends in the first and none receives. Put both in one stage.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Swap {
        streams { main }
        params { comm: &Communicator, up: usize, down: usize, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage out on main { send x to up; }
        stage inn on main { recv y from down; }
    }
}

fn main() {}
