//! Every rank runs the same group, so a peer's `send` of 4 elements arrives in this `recv` of
//! 8: no pairing works, and the ranks fail (CPU backend) or hang (NCCL).

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params {
            comm: &Communicator,
            up: usize, down: usize,
            field: &mut DeviceBuffer<f32>, halo: &mut DeviceBuffer<f32>,
        }
        stage exchange on main {
            send field[0..4] to up;
            recv halo[0..8] from down;
        }
    }
}

fn main() {}
