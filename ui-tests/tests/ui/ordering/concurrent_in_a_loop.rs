//! `concurrent` claims inside a `for` that every iteration contradicts (issue 23, class 3):
//! two stages on one element of a stream array, and two stages that touch a whole buffer one
//! of them writes.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Claims {
        streams { main, work[lanes] }
        params { lanes: usize, chunks: usize, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        for i in 0..chunks {
            stage a on work[i % lanes] { fill x[i..i + 1] = 0.0; }
            stage b on work[i % lanes] { fill y[i..i + 1] = 0.0; }
            concurrent(a, b);
            stage c on work[(i + 1) % lanes] { fill y = 1.0; }
            stage d on main { copy y -> x[i..i + 1]; }
            concurrent(c, d);
        }
    }
}

fn main() {}
