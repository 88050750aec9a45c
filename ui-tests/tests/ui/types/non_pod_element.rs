//! Buffers hold plain data (`bytemuck::Pod`): a `String` owns a host heap pointer, so there
//! is no `DeviceBuffer<String>`. rustc reports the bound on the param's type.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { names: &mut DeviceBuffer<String>, y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
