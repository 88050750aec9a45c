//! `&mut y` passes `y` to be written, but the call lists it in `reads(...)`: the macro would
//! let other stages read it concurrently. Declare it in `writes(...)`, or pass `&y`.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Smooth {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage smooth on main {
            call smooth(&mut y) reads(y);
        }
    }
}

fn smooth(_stream: &TypedStream<SmoothMain>, _y: &mut DeviceBuffer<f32>) -> Result<()> {
    Ok(())
}

fn main() {}
