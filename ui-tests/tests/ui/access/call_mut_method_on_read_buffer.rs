//! A buffer listed in `reads(...)` is seen shared inside the call's arguments:
//! `y.as_view_mut()` borrows it mutably. Declare it in `writes(...)`.

use gpu_pipeline::{DeviceBuffer, DeviceViewMut, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Smooth {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage smooth on main {
            call smooth(y.as_view_mut()) reads(y);
        }
    }
}

fn smooth(_stream: &TypedStream<SmoothMain>, _y: DeviceViewMut<'_, f32>) -> Result<()> {
    Ok(())
}

fn main() {}
