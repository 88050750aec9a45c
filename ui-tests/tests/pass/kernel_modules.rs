//! Several kernel modules, one from PTX text and one from a cubin image, with host
//! implementations, 1-, 2- and 3-D launch shapes and dynamic shared memory.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

mod host {
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }
}

gpu_pipeline! {
    /// Two modules over one buffer.
    pub pipeline Modules {
        streams { main }
        unsafe kernels text = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            /// `y += a * x`.
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]) host = host::saxpy;
            fn empty();
        }
        unsafe kernels image = cubin(include_bytes!("../../../runtime/kernels/test_kernels.sm_90.cubin")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
            fn reduce_sum(n: u32, input: &[f32; unbounded], out: &mut [f32; unbounded]);
        }
        params { n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, sum: &mut DeviceBuffer<f32> }
        stage compute on main {
            launch text::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
            launch text::empty() grid (1, 1) block (32, 1, 1);
            launch image::add_scalar(n, 2.0 * a, y) block 128 grid n.div_ceil(128);
            launch image::reduce_sum(n, y, sum) grid 1 block 256 shared 256 * 4;
        }
    }
}

fn step(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, sum: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Modules::new(ctx)?;
    pipeline.run(ModulesParams { n: 1024, a: 0.5, x, y, sum })?.wait()
}

fn main() {
    let _ = step;
}
