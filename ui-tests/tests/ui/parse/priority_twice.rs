//! Each stream option is given once: `priority` twice on one stream is rejected at the second.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main(priority = high, priority = low) }
        params { y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
