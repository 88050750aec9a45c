//! Two stages on one stream run one after the other, so claiming them `concurrent` is false.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage clear_x on main {
            fill x = 0.0;
        }
        stage clear_y on main {
            fill y = 0.0;
        }
        concurrent(clear_x, clear_y);
    }
}

fn main() {}
