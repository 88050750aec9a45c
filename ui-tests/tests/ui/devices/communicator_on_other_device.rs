//! A `send` on a stream of `gpu1` through a communicator on `gpu0`: an NCCL communicator
//! runs on one device. Put the stage on a stream of `gpu0` (or declare the communicator
//! `on gpu1`).

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main, other on gpu1 }
        params { comm: &Communicator, peer: usize, a: &DeviceBuffer<f32> on gpu1 }
        stage exchange on other {
            send a to peer;
        }
    }
}

fn main() {}
