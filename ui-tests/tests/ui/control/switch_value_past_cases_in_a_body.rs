//! Inside a loop body, a `fill` sets a switch's value to 2 right before a two-case `switch`:
//! no case ever runs. Fill a case's label, or add the case.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, mode: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        stage solve on main {
            while r > 0u32 max 10 {
                launch k::gp_bump(r) grid 1u32 block 1u32;
                fill mode = 2u32;
                switch mode {
                    0 => { launch k::gp_bump(out) grid 1u32 block 1u32; }
                    1 => {}
                }
            }
        }
    }
}

fn main() {}
