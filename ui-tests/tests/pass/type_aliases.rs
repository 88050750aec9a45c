//! Element and scalar types written through aliases are compared by the compiler: a
//! `DeviceBuffer<Real>` for `&[f32]`, a `&[Real]` kernel parameter, a copy between `Real` and
//! `f32`, and a host implementation spelled with the alias.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

type Real = f32;

fn scale_host(n: u32, value: Real, data: &mut [Real]) {
    for v in &mut data[..n as usize] {
        *v += value;
    }
}

gpu_pipeline! {
    pub pipeline Aliased {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [Real; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]) host = scale_host;
        }
        params { n: u32, a: Real, x: &DeviceBuffer<Real>, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<Real> }
        stage axpy on main {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
            launch k::add_scalar(n, a, y) grid n.div_ceil(256) block 256;
        }
        stage save on copy {
            copy y -> out;
        }
    }
}

fn step(ctx: &Context, x: &DeviceBuffer<Real>, y: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<Real>) -> Result<()> {
    let mut pipeline = Aliased::new(ctx)?;
    let mut graph = pipeline.capture(AliasedParams { n: 1024, a: 2.0, x, y, out })?;
    graph.set_a(1.0)?;
    graph.launch()
}

fn main() {
    let _ = step;
}
