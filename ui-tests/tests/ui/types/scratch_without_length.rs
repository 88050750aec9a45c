//! A scratch buffer is allocated by the pipeline, so it needs a length: `= LEN`.

use gpu_pipeline::gpu_pipeline;

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { n: usize }
        scratch { tmp: DeviceBuffer<f32> }
        stage clear on main {
            fill tmp = 0.0;
        }
    }
}

fn main() {}
