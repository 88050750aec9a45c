//! Each stage is declared once: two stages called `clear` are rejected at the second.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill x = 0.0;
        }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
