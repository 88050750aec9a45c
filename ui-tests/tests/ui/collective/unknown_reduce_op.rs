//! `all_reduce(mean)`: NCCL's operators are `sum`, `prod`, `max`, `min` and `avg`.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Residual {
        streams { main }
        params { comm: &Communicator, norm: &mut DeviceBuffer<f32> }
        stage reduce on main {
            all_reduce(mean) norm;
        }
    }
}

fn main() {}
