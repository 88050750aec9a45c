//! Two steps named `smooth` and `smooth_steps`: the second's `run_smooth_steps` is the
//! first's n-step method.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { x: &mut DeviceBuffer<f32> }
        step smooth {
            stage a on main { launch k::add_scalar(1u32, 1.0f32, x) grid 1u32 block 1u32; }
        }
        step smooth_steps {
            stage b on main { launch k::add_scalar(1u32, 2.0f32, x) grid 1u32 block 1u32; }
        }
    }
}

fn main() {}
