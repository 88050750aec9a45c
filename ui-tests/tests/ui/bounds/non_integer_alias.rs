//! A scalar whose type the macro cannot judge by its spelling (an alias) is asserted by the
//! compiler, at the name in the bound: `Len` is `f32` here, which counts no elements.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

type Len = f32;

gpu_pipeline! {
    pub pipeline Scale {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: Len, value: f32, data: &mut [f32; n]);
        }
        params { n: Len, value: f32, y: &mut DeviceBuffer<f32> }
        stage scale on main {
            launch k::add_scalar(n, value, y) grid 1 block 256;
        }
    }
}

fn main() {}
