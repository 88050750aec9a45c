//! Each stream is declared once: the second `main` is rejected.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main, main(non_blocking) }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
