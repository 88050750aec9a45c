//! A buffer in `reads(...)` reaches the closure as `&[T]`; to change it, declare it in
//! `writes(...)`.

use gpu_pipeline::{PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Inspect {
        streams { main }
        params { snapshot: &mut PinnedBuffer<f32> }
        stage touch on main { host |snapshot: &mut [f32]| { snapshot[0] = 1.0; } reads(snapshot); }
    }
}

fn main() {}
