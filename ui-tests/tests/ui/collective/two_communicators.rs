//! Two communicators in one pipeline: every rank must issue its operations in one order on
//! one communicator. Keep one.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { world: &Communicator, rows: &Communicator, field: &mut DeviceBuffer<f32> }
        stage reduce on main {
            all_reduce(sum) field;
        }
    }
}

fn main() {}
