//! Two elements of a buffer array swapped at the end of a loop body: a swap renames whole
//! params.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
        }
        params { xs: &mut [DeviceBuffer<u32>], r: &mut DeviceBuffer<u32> }
        stage solve on main {
            while r > 1u32 max 100 {
                launch k::gp_step(xs[0], xs[1], r) grid 1u32 block 1u32;
                swap(xs[0], xs[1]);
            }
        }
    }
}

fn main() {}
