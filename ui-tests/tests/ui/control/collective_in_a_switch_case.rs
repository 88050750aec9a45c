//! An `all_reduce` in one case of a device `switch`: each rank's GPU picks its case, but
//! every rank must enqueue the same collectives. Communicate before or after the `switch`, or
//! decide on the host.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        params { comm: &Communicator, mode: &mut DeviceBuffer<u32>, residual: &mut DeviceBuffer<f32> }
        stage solve on main {
            switch mode {
                0 => { all_reduce(max) residual; }
                1 => { fill residual = 0.0; }
            }
        }
    }
}

fn main() {}
