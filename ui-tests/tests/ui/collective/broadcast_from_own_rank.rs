//! A broadcast from `comm.rank()`: every rank names itself the root, so each would send and
//! none receive. Name one rank, the same on all (`from 0`, or a scalar param).

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Share {
        streams { main }
        params { comm: &Communicator, field: &mut DeviceBuffer<f32> }
        stage share on main {
            broadcast field from comm.rank();
        }
    }
}

fn main() {}
