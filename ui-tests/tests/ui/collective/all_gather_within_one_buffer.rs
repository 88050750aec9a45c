//! Every rank's first 4 elements gathered into the rest of the same buffer: a collective takes
//! its two sides as two buffers, so one buffer cannot be both, even in ranges that do not
//! overlap. Gather into a buffer of its own and copy that into place.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Gather {
        streams { main }
        params { comm: &Communicator, field: &mut DeviceBuffer<f32> }
        stage gather on main {
            all_gather field[0..4] -> field[4..12];
        }
    }
}

fn main() {}
