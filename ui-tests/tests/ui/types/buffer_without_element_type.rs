//! A buffer type names its element type: `&mut DeviceBuffer` needs `<f32>` or the like.
//! (Buffer types are recognised by their last path segment, so a full path works too.)

use gpu_pipeline::gpu_pipeline;

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { y: &mut gpu_pipeline::DeviceBuffer }
        stage clear on main {
            fill y = 0.0;
        }
    }
}

fn main() {}
