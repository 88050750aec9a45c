//! One communication group (consecutive statements, one `ncclGroupStart` ... `ncclGroupEnd`)
//! that receives into elements it also sends, with constant ranges: refused when the program
//! compiles (issue 23, class 2), since the group's operations run in any order.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params { comm: &Communicator, x: &mut DeviceBuffer<f32> }
        stage exchange on main {
            send x[0..4] to 1;
            recv x[2..6] from 1;
        }
    }
}

fn main() {}
