//! A `Condition` compared with a value: a kernel-set condition is tested by its bare name
//! (`if go`), and its setter is not also reported as setting it for nothing.

use gpu_pipeline::{ConditionSetter, DeviceBuffer, gpu_pipeline};

fn check(_: &[u32], _: ConditionSetter<'_>) {}
fn sweep(_: &mut [u32]) {}

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = check;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = sweep;
        }
        params { value: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        stage act on main {
            launch k::gp_set_to(value, go) grid 1u32 block 1u32;
            if go == 1u32 {
                launch k::gp_bump(out) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
