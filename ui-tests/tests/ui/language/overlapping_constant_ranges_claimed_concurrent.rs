//! Constant ranges are ordered when the program compiles: `x[0..9]` and `x[8..16]` share
//! element 8, so the two stages cannot be concurrent.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halves {
        streams { left, right }
        params { x: &mut DeviceBuffer<f32> }
        stage low on left { fill x[0..9] = 1.0; }
        stage high on right { fill x[8..16] = 2.0; }
        concurrent(low, high);
    }
}

fn main() {}
