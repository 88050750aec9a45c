//! A bound is a product of integer parameters and literals, optionally plus a literal: the
//! runtime evaluates exactly that before every launch. `(nx + 2) * (ny + 2)` is not that
//! shape: pass the padded extent as a parameter of its own and bound the buffer by it.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(nx: u32, ny: u32, value: f32, data: &mut [f32; (nx + 2) * (ny + 2)]);
        }
        params { nx: u32, ny: u32, value: f32, y: &mut DeviceBuffer<f32> }
        stage scale on main {
            launch k::add_scalar(nx, ny, value, y) grid 1 block 256;
        }
    }
}

fn main() {}
