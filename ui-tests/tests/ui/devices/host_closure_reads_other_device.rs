//! A host closure on a stream of `gpu0` that declares pinned memory of `gpu1`: the host
//! function is ordered against what it declares on its own stream, so the memory must be the
//! stage's device's (it failed at every run). Declare it `on gpu0`, or run the closure on a
//! stream of `gpu1`.

use std::sync::{Arc, Mutex};

use gpu_pipeline::{PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Watch {
        devices { gpu0, gpu1 }
        streams { a on gpu0, b on gpu1 }
        params { log: Arc<Mutex<Vec<f32>>>, out: &PinnedBuffer<f32> on gpu1 }
        stage see on a {
            host move |out: &[f32]| { log.lock().unwrap().push(out[0]); } reads(out);
        }
    }
}

fn main() {}
