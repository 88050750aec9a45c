//! A `call` lists every buffer it is passed in `reads(...)` or `writes(...)`, or the macro
//! could not order it against other stages: `y` is passed but not declared.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Blas {
        streams { main }
        params { x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage gemv on main {
            call gemv(x, y) reads(x);
        }
    }
}

fn gemv(
    _stream: &TypedStream<BlasMain>,
    _x: &DeviceBuffer<f32>,
    _y: &mut DeviceBuffer<f32>,
) -> Result<()> {
    Ok(())
}

fn main() {}
