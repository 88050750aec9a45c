//! A module's image is its text or bytes, embedded at compile time: a string naming the file
//! (`ptx("kernels/scale.ptx")`) would be loaded as PTX and define no kernel.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Scale {
        streams { main }
        unsafe kernels k = ptx("kernels/scale.ptx") {
            fn scale(n: u32, a: f32, x: &mut [f32; n]);
        }
        params { n: u32, x: &mut DeviceBuffer<f32> }
        stage s on main {
            launch k::scale(n, 2.0, x) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
