//! `--exchange onesided`: one process per GPU, as with `nccl`, but no NCCL kernel moves the
//! halos: each rank's kernel stores its first and last rows straight into its neighbours'
//! halo rows, in memory the neighbours exported to it ([`Window`]: CUDA IPC handles passed
//! through the communicator, mapped over NVLink), as NVIDIA's NVSHMEM variants do between
//! processes. The step is a `gpu_pipeline!` ([`OnesidedStep`]): each launch names the part of
//! a neighbour's window it writes (`b_halos[nx..2 * nx] on rank up`) and the halos it reads
//! (`a_halos[..nx]`), and the macro derives the signals that order the exchange, inside the
//! captured step:
//!
//! ```text
//! a -> b:  wait until the neighbours read what this rank stored into their b halos
//!          wait until the neighbours stored into this rank's a halos
//!          jacobi_peer a -> b, edge rows into the neighbours' b halos, residual into norm[0]
//!          signal written(b) to the neighbours; signal read(a) to the neighbours
//! b -> a:  the same with a and b exchanged, residual into norm[1]
//! ```
//!
//! Each rank's `a` and `b` halos are one window each (`[top row | bottom row]`); its block of
//! rows is an ordinary buffer. The step reads `a`'s halos before it writes them, so before the
//! first step each rank sets its own `a` halos (the initial grid's rows, as the other modes
//! start) and counts them as written by its neighbours ([`Window::mark_written`]). The residual
//! of the last iteration is reduced over the ranks with one `all_reduce` after the replays. On
//! one rank there is no neighbour to store into: the mode needs two ranks or more (the
//! single-rank check runs the `nccl` step, whose results are the same bit for bit).

use std::time::Instant;

use gpu_pipeline::collective::ReduceOp;
use gpu_pipeline::{CommStage, Communicator, Context, DeviceBuffer, Stream, Window, gpu_pipeline};

use super::{JacobiMultiArgs, Solved, barrier, decompose, initial_rows};
use crate::common::{BoxError, progress};

gpu_pipeline! {
    /// Two Jacobi iterations of one rank's block (`a -> b -> a`), each kernel storing its edge
    /// rows into the halos of the ranks `up` and `down` (one rank on two ranks) while it
    /// computes the block and its residual.
    pub pipeline OnesidedStep {
        streams { main(non_blocking) }
        // The kernel of the one-process `peer` step: it stores its edge rows wherever `to_up`
        // and `to_down` point, here into the neighbours' windows.
        unsafe kernels k = ptx(include_str!("../../kernels/jacobi_multi.ptx")) {
            fn jacobi_peer(nx: u32, rows: u32, halo_top: &[f32; nx], block: &[f32; nx * rows],
                           halo_bot: &[f32; nx], out: &mut [f32; nx * rows],
                           to_up: &mut [f32; nx], to_down: &mut [f32; nx],
                           norm: &mut [f32; 1])
                cpu = crate::jacobi_multi::host::jacobi_peer;
        }
        params {
            nx: u32,
            rows: u32,
            up: usize,
            down: usize,
            a_halos: &mut Window<f32>,
            b_halos: &mut Window<f32>,
            a: &mut DeviceBuffer<f32>,
            b: &mut DeviceBuffer<f32>,
            norm: &mut DeviceBuffer<f32>,
        }
        stage a_to_b on main {
            fill norm = 0.0f32;
            // My first row goes to `up`'s bottom halo, my last to `down`'s top halo.
            launch k::jacobi_peer(nx, rows, a_halos[..nx], a, a_halos[nx..2 * nx], b,
                                  b_halos[nx..2 * nx] on rank up, b_halos[..nx] on rank down,
                                  norm[0..1])
                grid ((nx - 2).div_ceil(32), rows.div_ceil(32)) block (32u32, 32u32);
        }
        stage b_to_a on main {
            launch k::jacobi_peer(nx, rows, b_halos[..nx], b, b_halos[nx..2 * nx], a,
                                  a_halos[nx..2 * nx] on rank up, a_halos[..nx] on rank down,
                                  norm[1..2])
                grid ((nx - 2).div_ceil(32), rows.div_ceil(32)) block (32u32, 32u32);
        }
    }
}

/// The distinct neighbours of `rank` of `size` (periodic): up, then down when it differs.
fn neighbours(rank: usize, size: usize) -> Vec<usize> {
    let (up, down) = ((rank + size - 1) % size, (rank + 1) % size);
    if up == down { vec![up] } else { vec![up, down] }
}

/// Solves the grid over the ranks of `comm` (two or more) on `ctx`, the halos stored by the
/// kernels into the neighbours' windows: the step captured once, `iterations / 2` replays
/// timed. Every rank of `comm` must call it with the same flags.
pub fn solve(
    ctx: &Context,
    comm: &Communicator,
    args: &JacobiMultiArgs,
    show_progress: bool,
) -> Result<Solved, BoxError> {
    let (rank, size) = (comm.rank(), comm.size());
    let interior = args.ny as usize - 2;
    if size < 2 || interior / size < 3 {
        return Err(format!(
            "--exchange onesided needs two ranks or more with 3 rows each; {size} rank(s) share \
             {interior}"
        )
        .into());
    }
    let nx = args.nx as usize;
    let (first, chunk) = decompose(args.ny, size, rank);
    let init = initial_rows(args.nx, args.ny, first, chunk);
    let stream = Stream::non_blocking(ctx)?;
    let peers = neighbours(rank, size);
    let (up, down) = ((rank + size - 1) % size, (rank + 1) % size);
    let mut a_halos = Window::<f32>::new(comm, &stream, 2 * nx, &peers)?;
    let mut b_halos = Window::<f32>::new(comm, &stream, 2 * nx, &peers)?;
    let block = |name: &str| -> Result<DeviceBuffer<f32>, BoxError> {
        Ok(DeviceBuffer::from_slice(&stream, &init[nx..(chunk + 1) * nx])?.named(name))
    };
    let (mut a, mut b) = (block("a_block")?, block("b_block")?);
    let mut norm = DeviceBuffer::<f32>::zeros(&stream, 2)?.named("norm");
    // This rank's `a` halos are the initial grid's rows, counted as its neighbours' writes:
    // the step reads them before it writes them.
    let mut halos = init[..nx].to_vec();
    halos.extend_from_slice(&init[(chunk + 1) * nx..]);
    let staged = DeviceBuffer::from_slice(&stream, &halos)?;
    stream.copy_dtod(&staged, a_halos.local_mut())?;
    a_halos.mark_written(&stream)?;
    stream.synchronize()?;

    let mut pipeline = OnesidedStep::new(ctx)?;
    let replays = args.iterations / 2;
    let replay_time = {
        let mut graph = pipeline.capture(OnesidedStepParams {
            nx: args.nx,
            rows: chunk as u32,
            up,
            down,
            a_halos: &mut a_halos,
            b_halos: &mut b_halos,
            a: &mut a,
            b: &mut b,
            norm: &mut norm,
        })?;
        barrier(ctx, comm)?;
        let bar = progress(
            u64::from(args.iterations),
            args.quiet || !show_progress,
            "iterations",
        );
        let tick = (replays / 100).max(1);
        let start = Instant::now();
        for r in 0..replays {
            graph.launch()?;
            if !bar.is_hidden() && (r + 1) % tick == 0 {
                graph.synchronize()?;
                bar.inc(2 * u64::from(tick));
            }
        }
        graph.synchronize()?;
        let replay_time = start.elapsed();
        bar.finish_and_clear();
        replay_time
    };

    // Both iterations' residuals of the last step, summed over the ranks.
    let mut total = DeviceBuffer::<f32>::zeros(&stream, 2)?;
    let mut group = CommStage::new(comm, &stream);
    group.all_reduce(&norm, .., &mut total, .., ReduceOp::Sum)?;
    group.finish()?;
    let total = total.to_vec(&stream)?;
    Ok(Solved {
        block: a.to_vec(&stream)?,
        first_row: first,
        residual: f64::from(total[1]).sqrt(),
        delayed_residual: f64::from(total[0]).sqrt(),
        replay_time,
        iterations: args.iterations,
    })
}
