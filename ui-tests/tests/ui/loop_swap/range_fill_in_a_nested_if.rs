//! A swapped buffer named as a range inside an `if` nested in the loop's body.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32>, m: &mut DeviceBuffer<u32> }
        stage solve on main {
            while r > 0u32 max 10 {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                if m > 0u32 {
                    fill y[0..4] = 0u32;
                }
                swap(x, y);
            }
        }
    }
}

fn main() {}
