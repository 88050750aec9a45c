//! A `swap` does not alternate the iterations of a `for`: four sweeps reading `u` and writing
//! `v` compute one half step four times (issue 23, class 5).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Sweeps {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { n: u32, u: &mut DeviceBuffer<f32>, v: &mut DeviceBuffer<f32> }
        swap(u, v);
        for sweep in 0..4 {
            stage relax on main { launch k::saxpy(n, 1.0, u, v) grid n.div_ceil(256) block 256; }
        }
    }
}

fn main() {}
