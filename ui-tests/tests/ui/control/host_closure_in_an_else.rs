//! A host closure in the `else` body of a device `if`, to log the branch taken.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        params { residual: &mut DeviceBuffer<f32>, out: &mut DeviceBuffer<f32> }
        stage solve on main {
            if residual > 0.5f32 {
                fill out = 1.0;
            } else {
                host || println!("converged");
            }
        }
    }
}

fn main() {}
