//! Reading a kernel-set condition back on the host by copying it into pinned memory.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { value: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32>, seen: &mut PinnedBuffer<u32> }
        scratch { go: Condition }
        stage decide on main {
            launch k::gp_set_to(value, go) grid 1u32 block 1u32;
            if go {
                launch k::gp_bump(out) grid 1u32 block 1u32;
            }
            copy go -> seen;
        }
    }
}

fn main() {}
