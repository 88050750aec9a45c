//! Several kinds of step over the same streams, kernels and buffers: each with its own
//! `run_`, `launch_` and `then_` methods, ordered on the GPU.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solver {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        /// One iteration.
        step iterate {
            stage relax on main { launch k::add_scalar(n, 1.0, x) grid n.div_ceil(256) block 256; }
        }
        /// Diagnostics every k iterations.
        step diagnose {
            stage save on copy { copy x -> out; }
        }
    }
}

fn solve(ctx: &Context, x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut pipeline = Solver::new(ctx)?;
    let mut run = pipeline.run_iterate(SolverParams { n: 1024, x: &mut *x, out: &mut *out })?;
    run.then_iterate()?.then_iterate()?.then_diagnose()?;
    run.wait()?;
    pipeline.run_diagnose_steps(SolverParams { n: 1024, x: &mut *x, out: &mut *out }, 2)?.wait()?;
    let mut graph = pipeline.capture(SolverParams { n: 1024, x, out })?;
    for k in 0..100 {
        graph.launch_iterate()?;
        if k % 10 == 9 {
            graph.launch_diagnose()?;
            let _ = graph.window()?.out()?[0];
        }
    }
    graph.synchronize()
}

fn main() {
    let _ = solve;
}
