//! `; unbounded`: a buffer the kernel indexes without a declared bound, beside an integer
//! parameter, written on purpose (here `saxpy`'s `x` is left unbounded while `y` is bound).

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

mod cpu {
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }
}

gpu_pipeline! {
    pub pipeline Mixed {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; n]) cpu = cpu::saxpy;
        }
        params { n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage run on main {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

fn step(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Mixed::new(ctx)?;
    let n = y.len() as u32;
    pipeline.run(MixedParams { n, a: 2.0, x, y })?.wait()
}

fn main() {
    let _ = step;
}
