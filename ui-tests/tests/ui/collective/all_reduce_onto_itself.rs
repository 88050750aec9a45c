//! `all_reduce(sum) norm -> norm` names one buffer on both sides; the in-place form has one
//! operand: `all_reduce(sum) norm`.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Residual {
        streams { main }
        params { comm: &Communicator, norm: &mut DeviceBuffer<f32> }
        stage reduce on main {
            all_reduce(sum) norm -> norm;
        }
    }
}

fn main() {}
