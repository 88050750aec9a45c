//! A `DeviceBuffer` inside a scalar param (`Arc<Mutex<...>>`): the pipeline sees a scalar,
//! so the `call`s that reach the buffer through it are not ordered, and the read in `r` races
//! with the write in `w`. Declare the buffer as a param of its own.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Hidden {
        streams { s1, s2 }
        params { store: std::sync::Arc<std::sync::Mutex<DeviceBuffer<f32>>>, out: &mut DeviceBuffer<f32> }
        stage w on s1 { call write_it(&store); }
        stage r on s2 { call read_it(&store, out) writes(out); }
    }
}

fn main() {}
