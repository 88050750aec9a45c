//! One buffer in two swaps at the end of one loop body (a three-way rotation written as two
//! swaps): each buffer takes part in one `swap`. Rotate by hand, or ping-pong two buffers.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32>, z: &mut DeviceBuffer<u32> }
        stage solve on main {
            while r > 0u32 max 10 {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                launch k::gp_step(y, z, r) grid 1u32 block 1u32;
                swap(x, y);
                swap(y, z);
            }
        }
    }
}

fn main() {}
