//! A host write between replays into `out`, which the body of a device `while` writes whole:
//! a replay that runs the loop overwrites what the host wrote. Reset it with a `fill` in the
//! step (before the loop), or write only what the step reads.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32> }
        stage solve on main {
            while r > 0u32 max 10 {
                launch k::gp_bump(r) grid 1u32 block 1u32;
                launch k::gp_bump(out) grid 1u32 block 1u32;
            }
        }
    }
}

fn replay(ctx: &Context, r: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<u32>) -> Result<()> {
    let mut pipeline = Solve::new(ctx)?;
    let mut graph = pipeline.capture(SolveParams { r, out })?;
    graph.write_out()?.fill(0)?;
    graph.launch()
}

fn main() {
    let _ = replay;
}
