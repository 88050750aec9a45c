//! A kernel reaches a buffer only through a `&[T]`/`&mut [T]` parameter, which the macro
//! orders: a device pointer smuggled in a scalar (`x.device_ptr()`) is an access it cannot
//! see. Declare a slice parameter and pass `x` for it.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Raw {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn gather(n: u32, source: u64, y: &mut [f32; unbounded]);
        }
        params { n: u32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage gather on main {
            launch k::gather(n, x.device_ptr(), y) grid n.div_ceil(256) block 256;
        }
    }
}

fn main() {}
