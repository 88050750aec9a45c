//! Expressions in a pipeline (grid sizes, scalar arguments, fill values) see the params:
//! `len` is not one, and rustc says so on the user's token.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { n: u32, y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = len as f32;
        }
    }
}

fn main() {}
