//! Each kernel parameter is named once in its signature: a second `n` is rejected.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Scale {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, n: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, value: f32, y: &mut DeviceBuffer<f32> }
        stage scale on main {
            launch k::add_scalar(n, value, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
