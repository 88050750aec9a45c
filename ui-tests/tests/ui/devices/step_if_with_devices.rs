//! `if step % k == 0` in a pipeline over two devices: refused like any conditional (the step
//! is captured from its streams), with advice for work done every k-th step.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Snapshots {
        devices { gpu0, gpu1 }
        streams { main, other on gpu1 }
        params { a: &mut DeviceBuffer<f32>, b: &mut DeviceBuffer<f32> on gpu1, snapshot: &mut DeviceBuffer<f32> on gpu1 }
        stage clear on main { fill a = 0.0; }
        stage save on other {
            if step % 10 == 0 {
                copy b -> snapshot;
            }
        }
    }
}

fn main() {}
