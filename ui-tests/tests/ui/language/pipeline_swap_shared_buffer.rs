//! A pipeline-level `swap(a, b)` of a shared input (`&`) with the buffer the step writes:
//! after `swap_a_b()` the step would write through the `&` param. Declare both `&mut`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, a: &DeviceBuffer<u32>, b: &mut DeviceBuffer<u32> }
        swap(a, b);
        stage solve on main {
            launch k::gp_step(a, b, r) grid 1u32 block 1u32;
        }
    }
}

fn main() {}
