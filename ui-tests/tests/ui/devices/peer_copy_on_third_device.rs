//! A peer copy from `gpu1` to `gpu2` on a stream of `gpu0`: a peer copy is enqueued on a
//! stream of one of its two devices.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Move {
        devices { gpu0, gpu1, gpu2 }
        streams { main }
        params { a: &DeviceBuffer<f32> on gpu1, b: &mut DeviceBuffer<f32> on gpu2 }
        stage shift on main {
            copy a -> b;
        }
    }
}

fn main() {}
