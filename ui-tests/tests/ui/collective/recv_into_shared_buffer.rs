//! `recv` into a buffer declared `&`: the caller may read it while the step runs. Declare it
//! `&mut`.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { comm: &Communicator, peer: usize, halo: &DeviceBuffer<f32> }
        stage exchange on main {
            recv halo from peer;
        }
    }
}

fn main() {}
