//! A `call` that declares `writes(y)` needs `y` declared `&mut`: `y` is declared `&`.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Blas {
        streams { main }
        params { x: &DeviceBuffer<f32>, y: &DeviceBuffer<f32> }
        stage gemv on main {
            call gemv(x, y) reads(x) writes(y);
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
