//! A stream named `graph` in pipeline `Manual` would get the marker type `ManualGraph`, which
//! is the name of the pipeline's captured graph type: the macro says so on the stream's name
//! rather than letting the two definitions clash.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Manual {
        streams { graph, params }
        params { x: &mut DeviceBuffer<f32> }
        stage zero on graph { fill x = 0.0; }
        stage one on params { fill x = 1.0; }
    }
}

fn main() {}
