//! A `concurrent` claim inside a `for` claims the stages of one iteration: it cannot name a
//! stage outside the loop.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Chunks {
        streams { main, work[2] }
        params { n: usize, x: &mut DeviceBuffer<f32> }
        stage first on main { fill x[..1] = 1.0; }
        for i in 0..n {
            stage clear on work[i % 2] { fill x[i + 1..i + 2] = 0.0; }
            concurrent(first, clear);
        }
    }
}

fn main() {}
