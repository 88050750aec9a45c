//! A halo exchange that sends to both neighbours and receives from one: every rank runs the
//! group, so one of each rank's sends is never received. Add the missing `recv`.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { comm: &Communicator, up: usize, down: usize, u: &mut DeviceBuffer<f32> }
        stage exchange on main {
            send u[1..2] to down;
            send u[8..9] to up;
            recv u[0..1] from down;
        }
    }
}

fn main() {}
