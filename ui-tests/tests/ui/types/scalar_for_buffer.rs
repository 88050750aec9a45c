//! A scalar passed where the kernel takes a buffer: `add_scalar` writes `data: &mut [f32]`.

use gpu_pipeline::gpu_pipeline;

gpu_pipeline! {
    pub pipeline Scale {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, value: f32 }
        stage scale on main {
            launch k::add_scalar(n, value, value) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
