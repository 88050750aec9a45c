//! A called function takes the stage's `&TypedStream<Marker>`, not a `&Stream` (whose
//! `synchronize` and event waits a capture cannot record); rustc's E0308 lands on `on
//! STREAM`.

use gpu_pipeline::{DeviceBuffer, Result, Stream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Exchange {
        streams { main }
        params { halo: &mut DeviceBuffer<f32> }
        stage exchange on main {
            call exchange(halo) writes(halo);
        }
    }
}

fn exchange(stream: &Stream, _halo: &mut DeviceBuffer<f32>) -> Result<()> {
    stream.synchronize()
}

fn main() {}
