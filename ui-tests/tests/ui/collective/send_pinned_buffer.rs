//! `send` of a pinned host buffer: NCCL moves device memory. `copy` it into a
//! `DeviceBuffer` first and send that.

use gpu_pipeline::{Communicator, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { comm: &Communicator, peer: usize, staging: &PinnedBuffer<f32> }
        stage exchange on main {
            send staging to peer;
        }
    }
}

fn main() {}
