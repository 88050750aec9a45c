//! A condition set by a launch in the `else` body of an `if`, and tested by an `if` after it:
//! the handle belongs to the scope of the `if` that tests it, and the `else` body is another
//! scope (a body that may not run, too). Set it right before the `if` that tests it, after
//! the `if ... else`.

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
        params {
            flag: &DeviceBuffer<u32>,
            value: &DeviceBuffer<u32>,
            a: &mut DeviceBuffer<u32>,
            b: &mut DeviceBuffer<u32>,
        }
        scratch { go: Condition }
        stage decide on main {
            if flag != 0u32 {
                launch k::gp_bump(a) grid 1u32 block 1u32;
            } else {
                launch k::gp_set_to(value, go) grid 1u32 block 1u32;
            }
            if go {
                launch k::gp_bump(b) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}
