//! A peer computed from a buffer the GPU writes: the peer is computed on the host when the
//! step is enqueued, before that buffer is written. Use a scalar param, or the
//! communicator's `rank()` and `size()`.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { comm: &Communicator, route: &DeviceBuffer<u32>, field: &DeviceBuffer<f32> }
        stage exchange on main {
            send field to route[0] as usize;
        }
    }
}

fn main() {}
