//! Device-side control flow: a `while` over an `f32` residual with `max`, an `if` on a `u32`
//! flag, an `if` on every k-th step taking a snapshot, nested loops, copies and fills in
//! bodies; eager runs and the built graph (its loop states, its edge count, the setters).

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Jacobi {
        streams { compute, copy }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
        }
        params {
            n: u32,
            tol: f32,
            limit: u32,
            every: u32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            residual: &mut DeviceBuffer<f32>,
            wide: &mut DeviceBuffer<f64>,
            flag: &mut DeviceBuffer<u32>,
            snapshot: &mut PinnedBuffer<f32>,
        }
        stage solve on compute {
            fill residual = f32::MAX;
            while residual > tol max limit {
                launch k::saxpy(n, 0.5f32, field, next) grid n.div_ceil(256) block 256;
                copy next -> field;
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
                fill flag = 0u32;
                while wide >= 1.0 max 4 {
                    fill wide = 0.0f64;
                }
            }
            if flag != 0u32 {
                fill field = 0.0f32;
            }
        }
        stage save on copy {
            if step % every == 0 {
                copy field -> snapshot;
            }
        }
    }
}

fn solve(
    ctx: &Context,
    field: &mut DeviceBuffer<f32>,
    next: &mut DeviceBuffer<f32>,
    residual: &mut DeviceBuffer<f32>,
    wide: &mut DeviceBuffer<f64>,
    flag: &mut DeviceBuffer<u32>,
    snapshot: &mut PinnedBuffer<f32>,
) -> Result<()> {
    let mut pipeline = Jacobi::new(ctx)?;
    pipeline
        .run(JacobiParams {
            n: 1024,
            tol: 1e-3,
            limit: 10_000,
            every: 10,
            field: &mut *field,
            next: &mut *next,
            residual: &mut *residual,
            wide: &mut *wide,
            flag: &mut *flag,
            snapshot: &mut *snapshot,
        })?
        .wait()?;
    let _: usize = Jacobi::GRAPH_EDGES;
    let mut graph = pipeline.capture(JacobiParams {
        n: 1024,
        tol: 1e-3,
        limit: 10_000,
        every: 10,
        field,
        next,
        residual,
        wide,
        flag,
        snapshot,
    })?;
    graph.launch()?;
    graph.set_tol(1e-6)?;
    graph.set_every(100)?;
    graph.launch()?;
    graph.synchronize()?;
    let loops = graph.exec().expect("the step is captured").loops();
    let _ = (loops[0].iterations(), loops[0].hit_limit(), graph.edge_count()?);
    Ok(())
}

fn main() {
    let _ = solve;
}
