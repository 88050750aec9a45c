//! A `send` and its `recv` with a `fill` between them: the `fill` splits them into two
//! groups, and every rank runs the same groups in the same order, so every rank sends in the
//! first and none receives. Move the `fill` before or after both.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Shift {
        streams { main }
        params { comm: &Communicator, up: usize, down: usize, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage a on main {
            send x[0..4] to up;
            fill y = 0.0f32;
            recv x[4..8] from down;
        }
    }
}

fn main() {}
