//! A loop `swap` of two pinned buffers (a copy per iteration into alternating host memory):
//! a loop's body exchanges whole `DeviceBuffer`s. One error for the swap, which says to swap
//! the device buffers the body computes in and copy the result out after the loop.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

fn step(_: &[u32], _: &mut [u32], _: &mut [u32]) {}

gpu_pipeline! {
    pub pipeline Sweeps {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = step;
        }
        params {
            x: &mut DeviceBuffer<u32>,
            y: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
            h: &mut PinnedBuffer<u32>,
            g: &mut PinnedBuffer<u32>,
        }
        stage solve on main {
            while r > 0u32 max 10u32 {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                copy y -> h;
                swap(h, g);
            }
        }
    }
}

fn main() {}
