//! Groups that pair across loops over params: a relay in which each rank receives from the
//! rank before it `recvs` times (none on the first) and sends to the rank after it `sends`
//! times (none on the last). Ranks may run such loops different numbers of times, so the
//! pairing of these groups is left to run time; a `send` and a `recv` in one group, and
//! kinds of step that hold one half each, compile too.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Relay {
        streams { main }
        params {
            comm: &Communicator,
            prev: usize,
            next: usize,
            recvs: usize,
            sends: usize,
            x: &mut DeviceBuffer<f32>,
        }
        for time in 0..recvs {
            stage inn on main { recv x from prev; }
        }
        for time in 0..sends {
            stage out on main { send x to next; }
        }
    }
}

gpu_pipeline! {
    pub pipeline Roles {
        streams { main }
        params { comm: &Communicator, peer: usize, x: &mut DeviceBuffer<f32> }
        step first {
            stage out on main { send x to peer; }
        }
        step last {
            stage inn on main { recv x from peer; }
        }
    }
}

fn main() {}
