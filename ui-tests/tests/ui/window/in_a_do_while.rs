//! A window launch inside a `do ... while`: the device decides how often it runs, so its
//! signals could not pair up with the neighbours'. Move it out.

use gpu_pipeline::{DeviceBuffer, Window, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Ring {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../tests/kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]);
            fn affine2(n: u32, a: f32, b: f32, src: &[f32; n], up: &mut [f32; n], down: &mut [f32; n]);
        }
        params {
            n: u32, up: usize, down: usize,
            halos: &mut Window<f32>, residual: &mut DeviceBuffer<f32>,
            base: &DeviceBuffer<f32>, seen: &mut DeviceBuffer<f32>,
        }
        stage store on main {
            launch k::affine2(n, 1.0, 0.0, base, halos[n..2 * n] on rank up, halos[..n] on rank down) grid n.div_ceil(256) block 256;
        }
        stage load on main {
            do {
                launch k::affine(2 * n, 1.0, 0.0, halos, seen) grid (2 * n).div_ceil(256) block 256;
                launch k::affine(1, 0.5, 0.0, seen, residual) grid 1 block 256;
            } while residual > 0.5f32 max 10;
        }
    }
}

fn main() {}
