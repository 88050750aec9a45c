//! A pipeline-level `swap` of two one-sided windows: the neighbours' launches write each
//! window by rank, whatever this rank's arrangement, so a swap here would read what they
//! wrote for the other. One error for the swap, which says to swap the device buffers the
//! step copies the window into or out of.

use gpu_pipeline::{DeviceBuffer, Window, gpu_pipeline};

fn copy(_: u32, _: f32, _: f32, _: &[f32], _: &mut [f32]) {}
fn copy2(_: u32, _: f32, _: f32, _: &[f32], _: &mut [f32], _: &mut [f32]) {}

gpu_pipeline! {
    pub pipeline Ring {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../tests/kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = copy;
            fn affine2(n: u32, a: f32, b: f32, src: &[f32; n], up: &mut [f32; n], down: &mut [f32; n])
                cpu = copy2;
        }
        params {
            n: u32,
            up: usize,
            down: usize,
            halos: &mut Window<f32>,
            other: &mut Window<f32>,
            base: &DeviceBuffer<f32>,
            seen: &mut DeviceBuffer<f32>,
        }
        swap(halos, other);
        stage store on main {
            launch k::affine2(n, 1.0, 0.0, base, halos[n..2 * n] on rank up, halos[..n] on rank down)
                grid n.div_ceil(256) block 256;
        }
        stage load on main {
            launch k::affine(2 * n, 1.0, 0.0, halos, seen) grid (2 * n).div_ceil(256) block 256;
        }
    }
}

fn main() {}
