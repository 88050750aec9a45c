//! A copy between constant ranges of different lengths is refused when the program compiles
//! (issue 23, class 2): `x[0..4] -> y[0..8]` copies 4 elements into 8.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Copies {
        streams { main }
        params { x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage move_it on main { copy x[0..4] -> y[0..8]; }
    }
}

fn main() {}
