//! `field[3]`: a communication statement takes an element range. For one element write
//! `field[3..4]`.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { comm: &Communicator, peer: usize, field: &DeviceBuffer<f32> }
        stage exchange on main {
            send field[3] to peer;
        }
    }
}

fn main() {}
