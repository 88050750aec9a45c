//! A `send` in a pipeline that declares no communicator: communication goes through one.
//! Add `comm: &Communicator` to `params { ... }`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { peer: usize, field: &DeviceBuffer<f32> }
        stage exchange on main {
            send field to peer;
        }
    }
}

fn main() {}
