//! Ping-pong without a doubled step: `swap(field, next)` exchanges the two grids between
//! replays; the scalar setters update every arrangement captured so far.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Jacobi {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn reduce_sum(n: u32, input: &[f32; unbounded], out: &mut [f32; unbounded]);
        }
        params {
            n: u32,
            a: f32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            residual: &mut DeviceBuffer<f32>,
            residual_host: &mut PinnedBuffer<f32>,
        }
        swap(field, next);
        stage step on main {
            launch k::saxpy(n, a, field, next) grid n.div_ceil(256) block 256;
            launch k::reduce_sum(n, next, residual) grid 1u32 block 256u32;
        }
        stage report on copy { copy residual -> residual_host; }
    }
}

fn solve(ctx: &Context, field: &mut DeviceBuffer<f32>, next: &mut DeviceBuffer<f32>, residual: &mut DeviceBuffer<f32>, residual_host: &mut PinnedBuffer<f32>) -> Result<usize> {
    let mut pipeline = Jacobi::new(ctx)?;
    let mut graph = pipeline.capture(JacobiParams { n: 4096, a: 0.25, field, next, residual, residual_host })?;
    let mut iterations = 0;
    loop {
        graph.launch()?;
        graph.swap_field_next()?;
        iterations += 1;
        if graph.window()?.residual_host()?[0] < 1e-6 || iterations == 100 {
            break;
        }
    }
    graph.set_a(0.5)?;
    graph.launch()?;
    let _ = graph.params().field.len();
    graph.synchronize()?;
    Ok(iterations)
}

fn main() {
    let _ = solve;
}
