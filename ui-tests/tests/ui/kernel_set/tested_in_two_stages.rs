//! One `Condition` set and tested in two stages: the second test is the one error (not also
//! its setter, which sits right before it).

use gpu_pipeline::{ConditionSetter, DeviceBuffer, gpu_pipeline};

fn check(_: &[u32], _: ConditionSetter<'_>) {}
fn sweep(_: &mut [u32]) {}

gpu_pipeline! {
    pub pipeline Solve {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = check;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = sweep;
        }
        params { value: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32>, other: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        stage first on main {
            launch k::gp_set_to(value, go) grid 1u32 block 1u32;
            if go {
                launch k::gp_bump(out) grid 1u32 block 1u32;
            }
        }
        stage second on side {
            launch k::gp_set_to(value, go) grid 1u32 block 1u32;
            if go {
                launch k::gp_bump(other) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
