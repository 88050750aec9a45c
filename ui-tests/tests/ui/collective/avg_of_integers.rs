//! `all_reduce(avg)` of `u32`: an integer mean truncates; reduce with `sum` and divide by
//! the number of ranks.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Count {
        streams { main }
        params { comm: &Communicator, hits: &mut DeviceBuffer<u32> }
        stage reduce on main {
            all_reduce(avg) hits;
        }
    }
}

fn main() {}
