//! A function param that returns a `DeviceBuffer` (`Arc<dyn Fn() -> Arc<DeviceBuffer<f32>>>`):
//! the `call`s that reach the buffer through it are not ordered, as for a buffer inside a
//! scalar. Declare the buffer as a param of its own.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Hidden {
        streams { s1, s2 }
        params {
            store: std::sync::Arc<dyn Fn() -> std::sync::Arc<DeviceBuffer<f32>> + Send + Sync>,
            out: &mut DeviceBuffer<f32>,
        }
        stage w on s1 { call write_it(&store); }
        stage r on s2 { call read_it(&store, out) writes(out); }
    }
}

fn main() {}
