//! A `recv` with no `send` anywhere: every rank waits in it for a send no rank makes. Add
//! the matching `send` next to it.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Gather {
        streams { main }
        params { comm: &Communicator, from: usize, inbox: &mut DeviceBuffer<f32>, total: &mut DeviceBuffer<f32> }
        stage pull on main {
            recv inbox from from;
            all_reduce(sum) total;
        }
    }
}

fn main() {}
