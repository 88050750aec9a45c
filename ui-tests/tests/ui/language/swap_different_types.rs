//! `swap` exchanges two buffers declared with one type: after the swap each must fit where
//! the other was.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline PingPong {
        streams { main }
        params { field: &mut DeviceBuffer<f32>, next: &mut DeviceBuffer<f64> }
        swap(field, next);
        stage clear on main { fill field = 0.0; fill next = 0.0; }
    }
}

fn main() {}
