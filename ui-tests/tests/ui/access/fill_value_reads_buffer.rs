//! The value of a `fill` is computed on the host when the step is enqueued: reading `s`
//! there races with the copy that writes it. Use a scalar param, or a kernel that reads `s`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Reset {
        streams { main, copy }
        params { y: &DeviceBuffer<f32>, s: &mut PinnedBuffer<f32>, x: &mut DeviceBuffer<f32> }
        stage download on copy {
            copy y -> s;
        }
        stage reset on main {
            fill x = s.as_slice().map(|v| v[0]).unwrap_or(0.0);
        }
    }
}

fn main() {}
