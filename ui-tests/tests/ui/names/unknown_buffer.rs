//! Statements name declared params or scratch buffers: `outptu` is a typo of `output`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Download {
        streams { main }
        params { y: &DeviceBuffer<f32>, output: &mut PinnedBuffer<f32> }
        stage download on main {
            copy y -> outptu;
        }
    }
}

fn main() {}
