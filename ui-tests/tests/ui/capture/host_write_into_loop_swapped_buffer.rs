//! A host write between replays into `x`, which the loop's launch only reads, but which the
//! body's `swap(x, y)` makes the launch write every other iteration (and the odd count's copy
//! writes). Write an input no swap names, or `fill` it in the step.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded]);
            fn gp_set_to(value: &[u32; unbounded], go: Condition);
            fn gp_bump(out: &mut [u32; unbounded]);
        }
        params { r: &mut DeviceBuffer<u32>, x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32> }
        stage solve on main {
            while r > 0u32 max 10 {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                swap(x, y);
            }
        }
    }
}

fn replay(ctx: &Context, r: &mut DeviceBuffer<u32>, x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32>) -> Result<()> {
    let mut pipeline = Solve::new(ctx)?;
    let mut graph = pipeline.capture(SolveParams { r, x, y })?;
    graph.write_x()?.fill(1)?;
    graph.launch()
}

fn main() {
    let _ = replay;
}
