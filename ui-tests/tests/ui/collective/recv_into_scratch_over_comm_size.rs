//! A halo received into a scratch buffer over a range computed from the communicator: the
//! step's plan, computed from scalar params, would count it as a write of all of `halo`, and
//! the copy of all of it would copy what nothing wrote. Pass the size as a scalar param
//! (`ranks: usize`, set from `comm.size()`) and write `halo[0..ranks]`.

use gpu_pipeline::{Communicator, DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params {
            comm: &Communicator,
            peer: usize,
            edge: &DeviceBuffer<f32>,
            seen: &mut PinnedBuffer<f32>,
        }
        scratch { halo: DeviceBuffer<f32> = 8 }
        stage exchange on main {
            send edge[0..comm.size()] to peer;
            recv halo[0..comm.size()] from peer;
        }
        stage save on main { copy halo -> seen; }
    }
}

fn main() {}
