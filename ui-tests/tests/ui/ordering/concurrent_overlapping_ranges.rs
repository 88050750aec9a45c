//! `concurrent` claims in a step whose shape is known only when it is enqueued (a stream
//! array) that every instance contradicts: two stages writing overlapping constant ranges,
//! and two stages writing one element of a buffer array.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Claims {
        streams { main, work[2] }
        params { x: &mut DeviceBuffer<f32>, xs: &mut [DeviceBuffer<f32>] }
        stage a on main { fill x[0..4] = 0.0; }
        stage b on work[0] { fill x[2..8] = 1.0; }
        concurrent(a, b);
        stage c on work[1] { fill xs[0] = 0.0; }
        stage d on main { fill xs[0] = 1.0; }
        concurrent(c, d);
    }
}

fn main() {}
