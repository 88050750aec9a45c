//! Two kinds of step exchanging one window in opposite phases: `forth` writes the neighbours'
//! halos first, `back` reads its own first. Whichever runs after the other waits for ever
//! (a write waiting for a read of the last write, or a read for a write). Start both the same
//! way.

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
            halos: &mut Window<f32>,
            base: &DeviceBuffer<f32>, seen: &mut DeviceBuffer<f32>,
        }
        step forth {
            stage store on main {
                launch k::affine2(n, 1.0, 0.0, base, halos[n..2 * n] on rank up, halos[..n] on rank down) grid n.div_ceil(256) block 256;
            }
            stage load on main {
                launch k::affine(2 * n, 1.0, 0.0, halos, seen) grid (2 * n).div_ceil(256) block 256;
            }
        }
        step back {
            stage load_first on main {
                launch k::affine(2 * n, 1.0, 0.0, halos, seen) grid (2 * n).div_ceil(256) block 256;
            }
            stage store_last on main {
                launch k::affine2(n, 1.0, 0.0, base, halos[n..2 * n] on rank up, halos[..n] on rank down) grid n.div_ceil(256) block 256;
            }
        }
    }
}

fn main() {}
