//! `recv_fills_part_of_scratch` with a `..=` range: `halo[0..=3]` is the same four elements
//! as `halo[0..4]` (it counted as all of `halo`, so this compiled and copied four undefined
//! elements), and nothing wrote `halo[4..8]`; and an inverted `..=` range is shown as written.

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
            send edge[0..=3] to peer;
            recv halo[0..=3] from peer;
        }
        stage save on main { copy halo -> seen; }
    }
}

gpu_pipeline! {
    pub pipeline Inverted {
        streams { main }
        params {
            comm: &Communicator,
            peer: usize,
            edge: &DeviceBuffer<f32>,
            halo: &mut DeviceBuffer<f32>,
        }
        stage exchange on main {
            send edge[3..=0] to peer;
            recv halo[0..0] from peer;
        }
    }
}

fn main() {}
