//! `swap(u, u)` exchanges a buffer with itself, which changes nothing (issue 23, class 6: the
//! message used to say `u` was already swapped with another buffer).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Swaps {
        streams { main }
        params { u: &mut DeviceBuffer<f32> }
        stage clear on main { fill u = 0.0; }
        swap(u, u);
    }
}

fn main() {}
