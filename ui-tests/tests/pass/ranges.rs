//! Constant ranges of one buffer are ordered when the program compiles: disjoint ones run
//! concurrently (and `concurrent` says so), overlapping ones wait; the step's counts are
//! constants.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halves {
        streams { left, right }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { x: &mut DeviceBuffer<f32> }
        stage low on left { launch k::add_scalar(512, 1.0, x[0..512]) grid 2u32 block 256u32; }
        stage high on right { launch k::add_scalar(512, 2.0, x[512..1024]) grid 2u32 block 256u32; }
        stage middle on left { fill x[256..768] = 0.0; }
        concurrent(low, high);
    }
}

const WAITS: usize = Halves::EVENT_WAITS_PER_STEP;

fn halves(ctx: &Context, x: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Halves::new(ctx)?;
    pipeline.run(HalvesParams { x })?.wait()
}

fn main() {
    let _ = (halves, WAITS, Halves::DOT);
}
