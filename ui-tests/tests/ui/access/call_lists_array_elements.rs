//! A `call` listing elements of a buffer array in `reads(...)`/`writes(...)`: the lists name
//! whole buffer params.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Move {
        streams { main }
        params { xs: &mut [DeviceBuffer<u32>] }
        stage shift on main {
            call shift(xs) reads(xs[0]) writes(xs[1]);
        }
    }
}

fn shift(_stream: &TypedStream<MoveMain>, _xs: &mut [DeviceBuffer<u32>]) -> Result<()> {
    Ok(())
}

fn main() {}
