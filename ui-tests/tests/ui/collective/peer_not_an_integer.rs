//! A peer of type `f32`: ranks are integers (our trait's E0277, on the peer).

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { comm: &Communicator, peer: f32, field: &DeviceBuffer<f32>, back: &mut DeviceBuffer<f32> }
        stage exchange on main {
            send field to peer; recv back from 0;
        }
    }
}

fn main() {}
