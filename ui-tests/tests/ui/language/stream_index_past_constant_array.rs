//! A constant stream index past a stream array of constant size is refused when the program
//! compiles (issue 23, class 2): `work[4]` of 4 streams.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Lanes {
        streams { main, work[4] }
        params { x: &mut DeviceBuffer<f32> }
        stage clear on work[4] { fill x = 0.0; }
    }
}

fn main() {}
