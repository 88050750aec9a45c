//! A `Condition` listed by a `call`: only the kernels given it set it, and a function between
//! its setter and its `if` could replace the handle, so the `if` would test another one.

use gpu_pipeline::{ConditionSetter, DeviceBuffer, gpu_pipeline};

fn check(_: &[u32], _: ConditionSetter<'_>) {}
fn sweep(_: &mut [u32]) {}

pub fn replace<T>(_: T) {}

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
            call replace(go) writes(go);
            if go {
                launch k::gp_bump(out) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
