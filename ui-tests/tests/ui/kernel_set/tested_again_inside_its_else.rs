//! One `Condition` tested by an `if`, then again by an `if` inside that `if`'s `else`: the
//! second test is the error.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { flag: &mut DeviceBuffer<u32>, x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        stage solve on main {
            launch k::gp_set_to(flag, go) grid 1u32 block 1u32;
            if go {
                launch k::gp_bump(x) grid 1u32 block 1u32;
            } else {
                if go {
                    launch k::gp_bump(y) grid 1u32 block 1u32;
                }
            }
        }
    }
}

fn main() {}
