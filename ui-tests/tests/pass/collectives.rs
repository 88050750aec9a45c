//! Every communication statement: a halo exchange with `send`/`recv` on element ranges of
//! one buffer (one group), `all_reduce` in place and into another buffer, `broadcast`,
//! `all_gather` and `reduce_scatter`, with peers from scalars and from the communicator;
//! run eagerly, then captured and replayed with a setter that re-captures.

use gpu_pipeline::{Communicator, Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Exchange {
        streams { compute, halo(priority = high) }
        params {
            comm: &Communicator,
            nx: usize,
            rows: usize,
            up: usize,
            field: &mut DeviceBuffer<f32>,
            norm: &mut DeviceBuffer<f32>,
            total: &mut DeviceBuffer<f32>,
            part: &DeviceBuffer<i64>,
            whole: &mut DeviceBuffer<i64>,
            mine: &mut DeviceBuffer<i64>,
        }
        stage exchange on halo {
            recv field[0..nx] from up;
            send field[(rows - 2) * nx..(rows - 1) * nx] to (comm.rank() + 1) % comm.size();
            recv field[(rows - 1) * nx..] from (comm.rank() + 1) % comm.size();
            send field[nx..2 * nx] to up;
        }
        stage reduce on compute {
            all_reduce(max) norm;
            all_reduce(sum) norm -> total;
        }
        stage share on halo {
            broadcast total from 0;
            all_gather part -> whole;
            reduce_scatter(sum) whole -> mine;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn step(
    ctx: &Context,
    comm: &Communicator,
    field: &mut DeviceBuffer<f32>,
    norm: &mut DeviceBuffer<f32>,
    total: &mut DeviceBuffer<f32>,
    part: &DeviceBuffer<i64>,
    whole: &mut DeviceBuffer<i64>,
    mine: &mut DeviceBuffer<i64>,
) -> Result<()> {
    let mut pipeline = Exchange::new(ctx)?;
    let (nx, rows) = (16, 8);
    let up = (comm.rank() + comm.size() - 1) % comm.size();
    pipeline
        .run(ExchangeParams { comm, nx, rows, up, field: &mut *field, norm: &mut *norm, total: &mut *total, part, whole: &mut *whole, mine: &mut *mine })?
        .wait()?;
    let mut graph = pipeline.capture(ExchangeParams { comm, nx, rows, up, field, norm, total, part, whole, mine })?;
    graph.launch()?;
    graph.set_up(up)?;
    graph.launch()?;
    graph.synchronize()
}

fn main() {
    let _ = step;
}
