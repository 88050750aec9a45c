//! Pipeline loops do not nest: one `for` over the product of the ranges, with `let`s for the
//! two indices, says the same.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Tiles {
        streams { main, work[4] }
        params { rows: usize, cols: usize, x: &mut DeviceBuffer<f32> }
        for i in 0..rows {
            for j in 0..cols {
                stage clear on work[(i + j) % 4] { fill x[i * cols + j..i * cols + j + 1] = 0.0; }
            }
        }
    }
}

fn main() {}
