//! Params and scratch buffers share one namespace: a scratch buffer may not reuse a param's
//! name.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { n: usize, y: &mut DeviceBuffer<f32> }
        scratch { y: DeviceBuffer<f32> = n }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
