//! `all_gather` from `f32` into `f64`: a collective moves bytes of one element type. Gather
//! into a buffer of `f32`.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Gather {
        streams { main }
        params { comm: &Communicator, part: &DeviceBuffer<f32>, whole: &mut DeviceBuffer<f64> }
        stage gather on main {
            all_gather part -> whole;
        }
    }
}

fn main() {}
