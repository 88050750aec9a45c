//! A `do ... while` ping-pong over two scratch buffers whose first iteration reads `u`, which
//! nothing wrote (only `t` is filled before the loop). Fill the half the first iteration
//! reads, or read `t` and write `u`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { n: usize, r: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        scratch { t: DeviceBuffer<u32> = n, u: DeviceBuffer<u32> = n }
        stage solve on main {
            fill t = 0u32;
            do {
                launch k::gp_step(u, t, r) grid 1u32 block 1u32;
                swap(t, u);
            } while r > 0u32 max 10;
            copy t -> out;
        }
    }
}

fn main() {}
