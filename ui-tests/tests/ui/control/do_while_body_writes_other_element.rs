//! A `do ... while` whose body writes only `r[1..2]`, not element 0, the one its condition
//! reads: the test gives the same answer every time. Write `r[0]` in the body (the kernel that
//! computes the residual), or test a buffer the body writes.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        stage solve on main {
            do {
                launch k::gp_bump(out) grid 1u32 block 1u32;
                fill r[1..2] = 0u32;
            } while r > 0u32 max 10;
        }
    }
}

fn main() {}
