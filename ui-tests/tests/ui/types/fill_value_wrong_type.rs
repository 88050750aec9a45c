//! The value of a `fill` has the buffer's element type: `y` holds `f32`, so `0` (an integer)
//! does not fit; write `0.0`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0;
        }
    }
}

fn main() {}
