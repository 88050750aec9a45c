//! A loop's `max` given the `f32` tolerance param by mistake (rustc's E0308, on the name):
//! `max` counts iterations, a `u32`.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { tol: f32, r: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        stage solve on main {
            while r > 0u32 max tol {
                launch k::gp_bump(r) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
