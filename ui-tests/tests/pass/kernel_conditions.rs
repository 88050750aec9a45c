//! Conditions kernels set: `while`, `do ... while`, `if`/`else` and `switch` on a `Condition`
//! (scratch), set by kernels whose parameter is declared `Condition`, nested too; a CPU
//! implementation takes a `ConditionSetter`.

use gpu_pipeline::{ConditionSetter, Context, DeviceBuffer, gpu_pipeline};

fn set_to(value: &[u32], mut go: ConditionSetter<'_>) {
    go.set(value[0]);
}

fn bump(out: &mut [u32]) {
    out[0] += 1;
}

gpu_pipeline! {
    pub pipeline Decided {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = set_to;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = bump;
        }
        params { limit: u32, value: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        scratch { go: Condition, again: Condition, yes: Condition, pick: Condition, inner: Condition }
        stage loops on main {
            launch k::gp_set_to(value, go) grid 1u32 block 1u32;
            while go max limit {
                launch k::gp_bump(out) grid 1u32 block 1u32;
                launch k::gp_set_to(value, inner) grid 1u32 block 1u32;
                if inner {
                    launch k::gp_bump(out) grid 1u32 block 1u32;
                }
                launch k::gp_set_to(value, go) grid 1u32 block 1u32;
            }
            do {
                launch k::gp_set_to(value, again) grid 1u32 block 1u32;
            } while again max 10;
        }
        stage decisions on main {
            launch k::gp_set_to(value, yes) grid 1u32 block 1u32;
            if yes {
                launch k::gp_bump(out) grid 1u32 block 1u32;
            } else {
                launch k::gp_bump(out) grid 1u32 block 1u32;
            }
            launch k::gp_set_to(value, pick) grid 1u32 block 1u32;
            switch pick {
                0 => { launch k::gp_bump(out) grid 1u32 block 1u32; }
                1 => {}
            }
        }
    }
}

fn main() -> gpu_pipeline::Result<()> {
    let ctx = Context::cpu();
    let stream = gpu_pipeline::Stream::new(&ctx)?;
    let mut value = DeviceBuffer::from_slice(&stream, &[0u32])?;
    let mut out = DeviceBuffer::from_slice(&stream, &[0u32])?;
    let mut pipeline = Decided::new(&ctx)?;
    pipeline
        .run(DecidedParams { limit: 5, value: &mut value, out: &mut out })?
        .wait()?;
    // value 0: the while does not run, the do-while once, `else`, case 0.
    assert_eq!(out.to_vec(&stream)?, [2]);
    Ok(())
}
