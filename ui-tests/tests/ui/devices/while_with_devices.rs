//! A device `while` in a pipeline over two devices: such a step is captured from its streams,
//! and a conditional node cannot be captured that way yet.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main, other on gpu1 }
        params { tol: f32, residual: &mut DeviceBuffer<f32>, b: &mut DeviceBuffer<f32> on gpu1 }
        stage solve on main {
            while residual > tol max 10 {
                fill residual = 0.0;
            }
        }
        stage zero on other { fill b = 0.0; }
    }
}

fn main() {}
