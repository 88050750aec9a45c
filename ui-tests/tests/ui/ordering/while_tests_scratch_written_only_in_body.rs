//! A `while` testing a scratch residual that only its body computes: the first test reads it
//! before anything wrote it. Write it before the loop, or use `do { .. } while res > ..`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32> }
        scratch { res: DeviceBuffer<u32> = 1 }
        stage solve on main {
            while res > 0u32 max 10 {
                launch k::gp_step(x, y, res) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
