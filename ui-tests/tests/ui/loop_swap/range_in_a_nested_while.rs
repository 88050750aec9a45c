//! A swapped buffer named as a range inside a `while` nested in the swapping loop's body (a
//! range is resolved once per step, for one arrangement). Pass the whole buffer and let the
//! kernel index the part.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, s: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32>, x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32> }
        stage solve on main {
            while r > 0u32 max 10 {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                while s > 0u32 max 10 {
                    launch k::gp_step(x[0..2], out, s) grid 1u32 block 1u32;
                }
                swap(x, y);
            }
        }
    }
}

fn main() {}
