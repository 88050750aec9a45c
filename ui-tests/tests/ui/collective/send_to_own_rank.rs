//! A `send` to the rank that runs the step with no `recv` from it in the same group: NCCL
//! pairs a rank's send to itself only with its own receive of that group, so it would wait
//! for ever. Add the `recv ... from comm.rank()` beside it, or send to another rank.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Loopback {
        streams { main }
        params { comm: &Communicator, field: &DeviceBuffer<f32> }
        stage exchange on main {
            send field to comm.rank();
        }
    }
}

fn main() {}
