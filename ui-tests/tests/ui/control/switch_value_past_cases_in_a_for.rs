//! A switch value set past the cases by a fill in the stage of a one-iteration `for`, which
//! every step runs: no case ever runs. Fill a case's label, or add the case.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { mode: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        for i in 0..1 {
            stage choose on main { fill mode = 2u32; }
        }
        stage solve on main {
            switch mode {
                0 => { launch k::gp_bump(out) grid 1u32 block 1u32; }
                1 => {}
            }
        }
    }
}

fn main() {}
