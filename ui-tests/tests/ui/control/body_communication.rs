//! An `all_reduce` inside a device `while`: how many times the body runs is decided on each
//! GPU, but every rank must enqueue the same collectives. Reduce after the loop, or decide
//! the loop on the host.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        params { comm: &Communicator, tol: f32, residual: &mut DeviceBuffer<f32> }
        stage solve on main {
            while residual > tol max 10 {
                all_reduce(max) residual;
            }
        }
    }
}

fn main() {}
