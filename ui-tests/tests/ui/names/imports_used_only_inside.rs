//! A pipeline with a mistake (one buffer passed twice to a launch that writes it) in a file
//! whose imports are used only inside the pipeline: the CPU implementations through a module
//! alias (`cpu = cpu::sweep`) and a name (`cpu = bump`), a constant through a module path.
//! The mistake is the one error: no unused-import warning on the `use` lines beside it.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

mod host {
    pub fn sweep(_: u32, _: f32, _: f32, _: &[f32], _: &mut [f32]) {}
    pub fn bump(_: u32, _: f32, _: f32, _: &mut [f32]) {}
}

use host as cpu;
use host::bump;
use std::f32::consts;

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../tests/kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::sweep;
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; n]) cpu = bump;
        }
        params { n: u32, x: &mut DeviceBuffer<f32> }
        stage s on main {
            launch k::affine(n, consts::PI, 0.0, x, x) grid 1u32 block 1u32;
            launch k::axpb(n, 1.0, 0.0, x) grid 1u32 block 1u32;
        }
    }
}

fn main() {}
