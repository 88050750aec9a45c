//! A `call` in a case of a device `switch` (its work is captured from a stream).

use gpu_pipeline::{DeviceBuffer, TypedStream, gpu_pipeline};

fn log<M>(_: &TypedStream<'_, M>, _: &DeviceBuffer<f32>) -> gpu_pipeline::Result<()> { Ok(()) }

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        params { mode: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<f32> }
        stage solve on main {
            switch mode {
                0 => { call log(out) reads(out); }
                1 => { fill out = 0.0; }
            }
        }
    }
}

fn main() {}
