//! `again` is set by the last launch of the first loop's body and tested by the loop after it.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { value: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        scratch { go: Condition, again: Condition }
        stage solve on main {
            launch k::gp_set_to(value, go) grid 1u32 block 1u32;
            while go max 10 {
                launch k::gp_bump(out) grid 1u32 block 1u32;
                launch k::gp_set_to(value, go) grid 1u32 block 1u32;
                launch k::gp_set_to(value, again) grid 1u32 block 1u32;
            }
            while again max 10 {
                launch k::gp_bump(out) grid 1u32 block 1u32;
                launch k::gp_set_to(value, again) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
