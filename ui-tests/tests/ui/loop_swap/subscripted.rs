//! A swapped buffer named as a range in the body.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
        }
        params { x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32>, r: &mut DeviceBuffer<u32>, c: &DeviceBuffer<u32>, f: &mut DeviceBuffer<f32> }
        scratch { go: Condition }
        stage solve on main {
            while r > 0u32 max 10 {
                launch k::gp_step(x[0..1], y, r) grid 1u32 block 1u32;
                swap(x, y);
            }
        }
    }
}

fn main() {}
