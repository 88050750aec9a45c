//! Each pipeline stream has its own marker type: a function typed for `Other`'s `main`
//! stream cannot be called from a stage of `Clear`, whose stream is a
//! `TypedStream<ClearMain>`.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Other {
        streams { main }
        params { x: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill x = 0.0;
        }
    }
}

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            call clear(y) writes(y);
        }
    }
}

fn clear(_stream: &TypedStream<OtherMain>, _y: &mut DeviceBuffer<f32>) -> Result<()> {
    Ok(())
}

fn main() {}
