//! A halo of 4 received into the first four elements of an 8-element scratch buffer, then the
//! whole buffer copied out: a `recv` writes only the elements of its range, and nothing wrote
//! `halo[4..8]`. Write them first, or copy only what was received (`copy halo[0..4] -> ...`).

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
            send edge[0..4] to peer;
            recv halo[0..4] from peer;
        }
        stage save on main { copy halo -> seen; }
    }
}

fn main() {}
