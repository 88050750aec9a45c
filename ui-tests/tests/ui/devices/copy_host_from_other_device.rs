//! A copy from `gpu1`'s memory to pinned host memory of `gpu0`, on a `gpu0` stream: host
//! memory copies to and from its own device. Copy on a stream of `gpu1` into pinned memory
//! declared `on gpu1`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Save {
        devices { gpu0, gpu1 }
        streams { main }
        params { field: &DeviceBuffer<f32> on gpu1, snapshot: &mut PinnedBuffer<f32> }
        stage save on main {
            copy field -> snapshot;
        }
    }
}

fn main() {}
