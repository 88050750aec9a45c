//! `swap` exchanges buffers; a scalar param changes with its setter.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline PingPong {
        streams { main }
        params { alpha: f32, field: &mut DeviceBuffer<f32> }
        swap(alpha, field);
        stage clear on main { fill field = alpha; }
    }
}

fn main() {}
