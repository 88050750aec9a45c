//! `swap` exchanges buffer params; a scratch buffer is the pipeline's own.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline PingPong {
        streams { main }
        params { field: &mut DeviceBuffer<f32> }
        scratch { next: DeviceBuffer<f32> = field.len() }
        swap(field, next);
        stage copy_over on main { copy field -> next; }
    }
}

fn main() {}
