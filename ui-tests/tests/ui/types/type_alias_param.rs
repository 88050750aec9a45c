//! A param declared with a `type` alias of a buffer type: the macro knows a buffer by its type
//! as written, so the message says to write the buffer type itself (issue 23, class 6).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

type Field = DeviceBuffer<f32>;

gpu_pipeline! {
    pub pipeline Aliased {
        streams { main }
        params { f: &mut Field }
        stage clear on main { fill f = 0.0; }
    }
}

fn main() {}
