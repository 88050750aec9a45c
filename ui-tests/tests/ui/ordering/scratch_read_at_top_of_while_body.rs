//! A loop body reads the scratch buffer `t` before it writes it, and nothing writes `t` before
//! the loop: the first iteration reads what no statement wrote. Write it before the loop.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, x: &mut DeviceBuffer<u32> }
        scratch { t: DeviceBuffer<u32> = x.len() }
        stage solve on main {
            while r > 0u32 max 10 {
                launch k::gp_step(t, x, r) grid 1u32 block 1u32;
                copy x -> t;
            }
        }
    }
}

fn main() {}
