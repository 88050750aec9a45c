//! A `call` declares every buffer its arguments name, also inside an expression: the view
//! `y.as_view_mut()` writes `y`, which no clause lists, so the macro could not order it. Add
//! it to `writes(...)`.

use gpu_pipeline::{DeviceBuffer, DeviceViewMut, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Smooth {
        streams { main }
        params { y: &mut DeviceBuffer<f32> }
        stage smooth on main {
            call smooth(y.as_view_mut());
        }
    }
}

fn smooth(_stream: &TypedStream<SmoothMain>, _y: DeviceViewMut<'_, f32>) -> Result<()> {
    Ok(())
}

fn main() {}
