//! A scratch flag belongs to the pipeline: if no stage before a `wait` writes it, nothing can,
//! and it stays 0. Write it in a stage the waiting one runs after.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Gate {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        scratch { open: FlagCell }
        stage gated on main {
            wait open & 1;
            fill y = 0.0;
        }
    }
}

fn main() {}
