//! `jacobi_multi`: the 2-D Laplace equation solved by Jacobi iteration on a grid split in
//! row blocks over ranks (one GPU each), the halo rows exchanged with NCCL `send`/`recv`
//! inside the replayed graph and the residual reduced with `all_reduce` on the device.
//!
//! The problem is NVIDIA's multi-gpu-programming-models Jacobi: an `nx` by `ny` grid of
//! `f32`, the left and right columns fixed at `sin(2 pi y / (ny - 1))`, the top and bottom
//! periodic (rank 0's upper neighbour is the last rank), the interior starting at zero, the
//! L2 norm of each iteration's update as the residual. The `ny - 2` interior rows are dealt
//! out in blocks, the first ranks getting one row fewer when they do not divide evenly.
//!
//! One replay of the captured step advances two iterations, `a -> b` then `b -> a`, and each
//! iteration overlaps its communication with its bulk work:
//!
//! ```text
//! side:               reduce: all_reduce(sum) norm -> total   (the previous step's residual)
//! halo (high prio):   edges a->b ─ exchange b ─┐ ┌▶ edges b->a ─ exchange a ─┐
//! compute (origin):   mid a->b ────────────────┴─┴▶ mid b->a ──────────────────┴─▶
//! ```
//!
//! `edges` computes the block's first and last rows (one kernel, both rows), `exchange` sends
//! them to the neighbours and receives their rows into the halos (one NCCL group), while `mid`
//! computes every row between them. Each kernel adds its rows' residual to its own element of
//! the step's residual (the two run at once). A rank's block is five buffers per grid
//! (`halo_top`, `top`, `mid`, `bot`, `halo_bot`), so the ordering the macro derives lets the
//! exchange and the mid rows run at once (`concurrent(...)` claims it, and the macro checks the
//! claim), and the next iteration's mid rows wait only for this one's rows, never for the
//! exchange: only the next edge rows read the halos it receives. The residual of a step (its
//! second iteration's) is reduced at the start of the next one, on its own stream, and zeroed
//! there, so the reduction's latency hides behind the first iteration (as the "delayed norm"
//! of NVIDIA's `multi_threaded_p2p_opt` does); the last step's is reduced after the replays by
//! a one-statement pipeline.
//!
//! Processes: on GPUs one process per rank, started by `gpu-pipeline-launch -n N -- ...`
//! (or `mpirun`, `srun`); on the CPU backend `--ranks N` threads, each with its own context,
//! pipeline and simulated rank. Checks: each rank's block against the same grid solved by a
//! single rank (the same pipeline with a one-rank communicator, on the same device) and, when
//! affordable, against a plain CPU Jacobi solver; the residual against both.

pub mod host;
pub mod onesided;
pub mod peer;

use std::f64::consts::PI;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_pipeline::launcher::Launch;
use gpu_pipeline::nccl::{self, UniqueId};
use gpu_pipeline::rendezvous::RankInfo;
use gpu_pipeline::{Backend, Communicator, Context, Device, DeviceBuffer, Stream, gpu_pipeline};

use crate::common::{
    BoxError, Check, REFERENCE_BUDGET, ReferenceMode, Report, check_output_path, cpu_threads,
    finish, format_duration, max_abs_diff, par_chunks, parse_args, progress,
};

gpu_pipeline! {
    /// Two Jacobi iterations of one rank's block (`a -> b -> a`), each overlapping the halo
    /// exchange of its edge rows with its bulk rows; the previous step's residual is reduced
    /// over all ranks meanwhile.
    pub pipeline JacobiStep {
        streams { compute, halo(priority = high), side }
        unsafe kernels jacobi = ptx(include_str!("../../kernels/jacobi_multi.ptx")) {
            fn jacobi_edges(nx: u32, rows: u32, halo_top: &[f32; nx], top: &[f32; nx],
                            mid: &[f32; nx * rows], bot: &[f32; nx], halo_bot: &[f32; nx],
                            out_top: &mut [f32; nx], out_bot: &mut [f32; nx],
                            norm: &mut [f32; 1])
                cpu = crate::jacobi_multi::host::jacobi_edges;
            fn jacobi_mid(nx: u32, rows: u32, top: &[f32; nx], mid: &[f32; nx * rows],
                          bot: &[f32; nx], out: &mut [f32; nx * rows], norm: &mut [f32; 1])
                cpu = crate::jacobi_multi::host::jacobi_mid;
        }
        params {
            comm: &Communicator,
            nx: u32,
            rows: u32,
            up: usize,
            down: usize,
            a_halo_top: &mut DeviceBuffer<f32>,
            a_top: &mut DeviceBuffer<f32>,
            a_mid: &mut DeviceBuffer<f32>,
            a_bot: &mut DeviceBuffer<f32>,
            a_halo_bot: &mut DeviceBuffer<f32>,
            b_halo_top: &mut DeviceBuffer<f32>,
            b_top: &mut DeviceBuffer<f32>,
            b_mid: &mut DeviceBuffer<f32>,
            b_bot: &mut DeviceBuffer<f32>,
            b_halo_bot: &mut DeviceBuffer<f32>,
            norm: &mut DeviceBuffer<f32>,
            total: &mut DeviceBuffer<f32>,
        }
        // Every iteration computes its residual, as NVIDIA's Jacobi does, the mid rows' into
        // element 0 and the edge rows' into element 1 (the two kernels run at once); the first
        // iteration's go to `first_norm` and are not reduced (only the step's last residual is).
        scratch { first_norm: DeviceBuffer<f32> = 2 }
        stage reduce on side {
            all_reduce(sum) norm -> total;
            fill norm = 0.0;
        }
        stage edges_ab on halo {
            launch jacobi::jacobi_edges(nx, rows, a_halo_top, a_top, a_mid, a_bot, a_halo_bot,
                                        b_top, b_bot, first_norm[1..2])
                grid ((nx - 2).div_ceil(256), 2u32) block (256u32, 1u32);
        }
        stage exchange_b on halo {
            recv b_halo_top from up;
            send b_bot to down;
            recv b_halo_bot from down;
            send b_top to up;
        }
        stage bulk_ab on compute {
            launch jacobi::jacobi_mid(nx, rows, a_top, a_mid, a_bot, b_mid, first_norm[0..1])
                grid ((nx - 2).div_ceil(32), rows.div_ceil(32)) block (32u32, 32u32);
        }
        stage edges_ba on halo {
            launch jacobi::jacobi_edges(nx, rows, b_halo_top, b_top, b_mid, b_bot, b_halo_bot,
                                        a_top, a_bot, norm[1..2])
                grid ((nx - 2).div_ceil(256), 2u32) block (256u32, 1u32);
        }
        stage exchange_a on halo {
            recv a_halo_top from up;
            send a_bot to down;
            recv a_halo_bot from down;
            send a_top to up;
        }
        stage bulk_ba on compute {
            launch jacobi::jacobi_mid(nx, rows, b_top, b_mid, b_bot, a_mid, norm[0..1])
                grid ((nx - 2).div_ceil(32), rows.div_ceil(32)) block (32u32, 32u32);
            // The next step's first iteration adds into `first_norm`: zeroed here, at the end
            // of this step, off the first iteration's path (its value is never read).
            fill first_norm = 0.0;
        }
        concurrent(reduce, edges_ab, bulk_ab);
        concurrent(exchange_b, bulk_ab);
        concurrent(edges_ba, bulk_ba);
        concurrent(exchange_a, bulk_ba);
    }
}

gpu_pipeline! {
    /// The residual of the last step, reduced over all ranks.
    pub pipeline Residual {
        streams { main }
        params { comm: &Communicator, norm: &DeviceBuffer<f32>, total: &mut DeviceBuffer<f32> }
        stage reduce on main {
            all_reduce(sum) norm -> total;
        }
    }
}

/// Flags of the `jacobi_multi` example.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "jacobi_multi",
    about = "2-D Jacobi split in row blocks over ranks (one GPU each): the halo rows exchanged \
             with NCCL send/recv and the residual all-reduced inside one captured step, \
             replayed; checked against the same grid on one rank.",
    after_help = "On GPUs, start one process per rank: `gpu-pipeline-launch -n 4 -- \
                  jacobi_multi --nx 16384 --ny 16384` (or mpirun, srun). Without a GPU (or \
                  with GPU_PIPELINE_BACKEND=cpu|cpu-checked) the ranks are --ranks threads on \
                  the CPU backend."
)]
pub struct JacobiMultiArgs {
    /// Grid width in cells (the columns 0 and nx-1 are fixed boundaries).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(3..=65536))]
    pub nx: u32,
    /// Grid height in cells (rows 0 and ny-1 are the periodic halos of the last and first
    /// ranks; the ny-2 rows between are split over the ranks, at least 3 each).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(5..=65536))]
    pub ny: u32,
    /// Jacobi iterations (even: one replay of the captured step runs two).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(2..))]
    pub iterations: u32,
    /// Ranks simulated as threads on the CPU backend. On GPUs the launcher decides (one
    /// process per rank); if given there, it must match.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub ranks: Option<u64>,
    /// On GPUs, start this many ranks on this host, one process per GPU (what
    /// `gpu-pipeline-launch -n N -- jacobi_multi ...` does). Ignored by a process the
    /// launcher, `mpirun` or `srun` already started as a rank.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64), conflicts_with = "ranks")]
    pub gpus: Option<u64>,
    /// How much of the run to replay with a plain CPU solver: `auto` replays all of it when
    /// that costs at most 4e9 cell updates.
    #[arg(long, value_enum, default_value_t = ReferenceMode::Auto)]
    pub reference: ReferenceMode,
    /// Skip the single-rank run of the whole grid (the check of every rank's block, and the
    /// one-rank time that parallel efficiency is computed from).
    #[arg(long)]
    pub no_single_rank: bool,
    /// Print the stage graph of one step (`JacobiStep::DOT`) in Graphviz DOT and exit.
    #[arg(long)]
    pub dot: bool,
    /// After the run, profile one more step and write rank 0's per-stage timings as a Chrome
    /// trace (open it in ui.perfetto.dev to see the exchange overlap the bulk).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Print one CSV line (rank 0): `jacobi_multi,nx,ny,iterations,ranks,ms_per_iteration,
    /// single_rank_ms_per_iteration` (the last empty with --no-single-rank).
    #[arg(long)]
    pub csv: bool,
    /// How the halo rows travel: `nccl`, one process per GPU exchanging them with NCCL
    /// send/recv inside the graph; `peer`, every GPU driven by this one process, each kernel
    /// storing its edge rows straight into its neighbours' halos over NVLink (as NVIDIA's
    /// multi_threaded_p2p_opt does; 1, 2, 4 or 8 devices); `onesided`, one process per GPU
    /// as with nccl, each kernel storing its edge rows into the neighbours' halo windows
    /// (CUDA IPC memory they exported), ordered by signals inside the graph (2 ranks or more).
    #[arg(long, value_enum, default_value_t = Exchange::Nccl)]
    pub exchange: Exchange,
    /// Turn the pipeline's fault tracking on: an asynchronous fault then names the first stage
    /// that did not complete, at the cost of one stream memory operation per stage on the
    /// origin's device (off by default: a fault names the pipeline only).
    #[arg(long)]
    pub track_faults: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Logging (`--log FILTER`).
    #[command(flatten)]
    pub log: crate::common::LogArgs,
}

/// How `jacobi_multi` exchanges the halo rows (`--exchange`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Exchange {
    /// One process per GPU; NCCL `send`/`recv` inside the captured step.
    Nccl,
    /// One process drives every GPU; each kernel stores its edge rows into its neighbours'
    /// halo buffers (peer access).
    Peer,
    /// One process per GPU; each kernel stores its edge rows into its neighbours' halos, in
    /// memory they exported to it (`Window`: CUDA IPC), ordered by signals in the graph.
    Onesided,
}

impl JacobiMultiArgs {
    /// The rules clap cannot express: an even iteration count, a writable trace file, and
    /// (when the rank count is known) at least 3 rows per rank.
    pub fn validate(&self) -> Result<(), String> {
        if !self.iterations.is_multiple_of(2) {
            return Err(format!(
                "--iterations {} is odd; one replay runs two iterations",
                self.iterations
            ));
        }
        if let Some(ranks) = self.ranks.or(self.gpus) {
            rows_per_rank(self.nx, self.ny, ranks as usize)?;
        }
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        if self.exchange == Exchange::Onesided && self.trace.is_some() {
            return Err(
                "--trace profiles the NCCL step; leave it out with --exchange onesided".into(),
            );
        }
        if self.exchange == Exchange::Peer {
            if self.trace.is_some() {
                return Err(
                    "--trace profiles the NCCL step; leave it out with --exchange peer".into(),
                );
            }
            if let Some(n) = self.ranks.or(self.gpus)
                && !peer::DEVICE_COUNTS.contains(&(n as usize))
            {
                return Err(format!(
                    "--exchange peer runs on {:?} devices, not {n}",
                    peer::DEVICE_COUNTS
                ));
            }
        }
        Ok(())
    }

    /// The stage graph `--dot` prints.
    pub fn dot(&self) -> Option<String> {
        self.dot.then(|| JacobiStep::DOT.to_owned())
    }
}

/// The most elements a rank's block may hold: the kernels index it with 32-bit offsets
/// (64-bit ones cost 3%, see examples/kernels/jacobi_multi.cu).
pub const MAX_BLOCK_ELEMENTS: usize = (1 << 31) - 1;

/// Checks that `ny - 2` interior rows give every one of `ranks` ranks at least 3, and that
/// no rank's block of `nx`-wide rows exceeds [`MAX_BLOCK_ELEMENTS`].
pub fn rows_per_rank(nx: u32, ny: u32, ranks: usize) -> Result<(), String> {
    let interior = ny as usize - 2;
    if ranks == 0 || interior / ranks < 3 {
        return Err(format!(
            "--ny {ny} gives {interior} interior rows, fewer than 3 for each of {ranks} rank(s); \
             use --ny {} or more",
            3 * ranks.max(1) + 2
        ));
    }
    let rows = interior.div_ceil(ranks);
    if rows * nx as usize > MAX_BLOCK_ELEMENTS {
        let fewest = (interior * nx as usize).div_ceil(MAX_BLOCK_ELEMENTS);
        return Err(format!(
            "--nx {nx} --ny {ny} on {ranks} rank(s) gives blocks of {rows} rows of {nx}, more \
             than the kernels' 2^31 - 1 elements; use {fewest} or more GPUs, or a smaller grid"
        ));
    }
    Ok(())
}

/// Rank `rank`'s interior rows of `ny`: the global index of its first and how many, dealt
/// out as NVIDIA's Jacobi does (the first ranks one row fewer when they do not divide).
pub fn decompose(ny: u32, ranks: usize, rank: usize) -> (usize, usize) {
    let interior = ny as usize - 2;
    let low = interior / ranks;
    let low_ranks = ranks * (low + 1) - interior;
    let chunk = if rank < low_ranks { low } else { low + 1 };
    let before = if rank < low_ranks {
        rank * low
    } else {
        low_ranks * low + (rank - low_ranks) * (low + 1)
    };
    (1 + before, chunk)
}

/// The fixed value of both boundary columns in global row `y`.
pub fn boundary(y: usize, ny: u32) -> f32 {
    (2.0 * PI * y as f64 / f64::from(ny - 1)).sin() as f32
}

/// The initial rows `first - 1 ..= first + chunk` of the grid (the block and its two halos):
/// zero but for the boundary columns.
pub fn initial_rows(nx: u32, ny: u32, first: usize, chunk: usize) -> Vec<f32> {
    let nx = nx as usize;
    let mut rows = vec![0.0f32; (chunk + 2) * nx];
    for (k, row) in rows.chunks_mut(nx).enumerate() {
        let value = boundary(first - 1 + k, ny);
        row[0] = value;
        row[nx - 1] = value;
    }
    rows
}

/// One grid of a rank's block on the device: the five buffers the step names.
#[derive(Debug)]
pub struct Grid {
    /// The row above the block (the upper neighbour's last).
    pub halo_top: DeviceBuffer<f32>,
    /// The block's first row.
    pub top: DeviceBuffer<f32>,
    /// The rows between its first and last.
    pub mid: DeviceBuffer<f32>,
    /// The block's last row.
    pub bot: DeviceBuffer<f32>,
    /// The row below the block (the lower neighbour's first).
    pub halo_bot: DeviceBuffer<f32>,
}

impl Grid {
    /// Uploads `rows` (the block and its halos, `nx` wide) into five buffers named
    /// `<name>_halo_top`, ... for race reports.
    fn upload(stream: &Stream, rows: &[f32], nx: usize, name: &str) -> Result<Grid, BoxError> {
        let count = rows.len() / nx;
        let part = |from: usize, to: usize, what: &str| -> Result<DeviceBuffer<f32>, BoxError> {
            Ok(DeviceBuffer::from_slice(stream, &rows[from * nx..to * nx])?
                .named(&format!("{name}_{what}")))
        };
        Ok(Grid {
            halo_top: part(0, 1, "halo_top")?,
            top: part(1, 2, "top")?,
            mid: part(2, count - 2, "mid")?,
            bot: part(count - 2, count - 1, "bot")?,
            halo_bot: part(count - 1, count, "halo_bot")?,
        })
    }

    /// The block's rows (without its halos), read back.
    fn interior(&self, stream: &Stream) -> Result<Vec<f32>, BoxError> {
        let mut rows = self.top.to_vec(stream)?;
        rows.extend(self.mid.to_vec(stream)?);
        rows.extend(self.bot.to_vec(stream)?);
        Ok(rows)
    }
}

/// The step's params over grids `a` and `b`.
#[allow(clippy::too_many_arguments)]
fn step_params<'p>(
    comm: &'p Communicator,
    nx: u32,
    rows: u32,
    a: &'p mut Grid,
    b: &'p mut Grid,
    norm: &'p mut DeviceBuffer<f32>,
    total: &'p mut DeviceBuffer<f32>,
) -> JacobiStepParams<'p> {
    let (rank, size) = (comm.rank(), comm.size());
    JacobiStepParams {
        comm,
        nx,
        rows,
        up: (rank + size - 1) % size,
        down: (rank + 1) % size,
        a_halo_top: &mut a.halo_top,
        a_top: &mut a.top,
        a_mid: &mut a.mid,
        a_bot: &mut a.bot,
        a_halo_bot: &mut a.halo_bot,
        b_halo_top: &mut b.halo_top,
        b_top: &mut b.top,
        b_mid: &mut b.mid,
        b_bot: &mut b.bot,
        b_halo_bot: &mut b.halo_bot,
        norm,
        total,
    }
}

/// What one solve of the grid (over the ranks of `comm`) gives this rank.
#[derive(Clone, Debug)]
pub struct Solved {
    /// This rank's block after the last iteration, row-major, without halos.
    pub block: Vec<f32>,
    /// The global index of its first row.
    pub first_row: usize,
    /// The residual (L2 norm of the update) of the last iteration, over all ranks.
    pub residual: f64,
    /// The residual of the second-to-last step's last iteration, which the last replay
    /// reduced on the device (the delayed norm).
    pub delayed_residual: f64,
    /// Wall time of the timed replays.
    pub replay_time: Duration,
    /// The iterations the timed replays ran.
    pub iterations: u32,
}

impl Solved {
    /// Milliseconds per iteration of the timed replays.
    pub fn ms_per_iteration(&self) -> f64 {
        self.replay_time.as_secs_f64() * 1e3 / f64::from(self.iterations)
    }
}

/// Solves the grid over the ranks of `comm` on `ctx`: one eager step to warm up (NCCL
/// connects its peers on first use), the grids reset, the step captured, and
/// `iterations / 2` replays timed. Every rank of `comm` must call it with the same flags.
pub fn solve(
    ctx: &Context,
    comm: &Communicator,
    args: &JacobiMultiArgs,
    show_progress: bool,
) -> Result<Solved, BoxError> {
    let (rank, size) = (comm.rank(), comm.size());
    rows_per_rank(args.nx, args.ny, size)?;
    let (nx, ny) = (args.nx, args.ny);
    let (first, chunk) = decompose(ny, size, rank);
    let rows = u32::try_from(chunk - 2)?;
    let stream = Stream::non_blocking(ctx)?;
    let mut norm = DeviceBuffer::<f32>::zeros(&stream, RESIDUAL_PARTS)?.named("norm");
    let mut total = DeviceBuffer::<f32>::zeros(&stream, RESIDUAL_PARTS)?.named("total");
    let mut pipeline = JacobiStep::new(ctx)?;
    pipeline.set_fault_tracking(args.track_faults);

    // Warm-up (NCCL's connections, the kernels' first launches) on a small grid split the
    // same way, so that the real grid is built and uploaded once: at 32768^2 each upload of
    // it costs seconds.
    {
        let (small_nx, small_ny) = (WARM_UP_NX.min(nx), warm_up_rows(size));
        let (small_first, small_chunk) = decompose(small_ny, size, rank);
        let init = initial_rows(small_nx, small_ny, small_first, small_chunk);
        let upload = |name: &str| Grid::upload(&stream, &init, small_nx as usize, name);
        let (mut a, mut b) = (upload("warm-up a")?, upload("warm-up b")?);
        pipeline
            .run(step_params(
                comm,
                small_nx,
                u32::try_from(small_chunk - 2)?,
                &mut a,
                &mut b,
                &mut norm,
                &mut total,
            ))?
            .wait()?;
    }
    let init = initial_rows(nx, ny, first, chunk);
    let upload = |name: &str| Grid::upload(&stream, &init, nx as usize, name);
    let (mut a, mut b) = (upload("a")?, upload("b")?);
    drop(init);
    stream.memset_u32(&mut norm, 0)?;
    stream.synchronize()?;

    let replays = args.iterations / 2;
    let bar = progress(
        u64::from(args.iterations),
        args.quiet || !show_progress,
        "iterations",
    );
    let tick = (replays / 100).max(1);
    let mut graph = pipeline.capture(step_params(
        comm, nx, rows, &mut a, &mut b, &mut norm, &mut total,
    ))?;
    // The graph's work goes to the device before the clock starts, and every rank starts its
    // clock together: without the barrier a rank that captured sooner times its wait for the
    // slowest rank's start-up too (run-to-run spread of a third on four GPUs).
    if let Some(exec) = graph.exec() {
        exec.upload(&stream)?;
    }
    stream.synchronize()?;
    barrier(ctx, comm)?;
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
    drop(graph);

    let delayed = total.to_vec(&stream)?.iter().sum::<f32>();
    let mut residual = Residual::new(ctx)?;
    residual
        .run(ResidualParams {
            comm,
            norm: &norm,
            total: &mut total,
        })?
        .wait()?;
    let last = total.to_vec(&stream)?.iter().sum::<f32>();
    Ok(Solved {
        block: a.interior(&stream)?,
        first_row: first,
        residual: f64::from(last).sqrt(),
        delayed_residual: f64::from(delayed).sqrt(),
        replay_time,
        iterations: args.iterations,
    })
}

/// The elements of the step's residual: the mid rows' and the edge rows', summed on the host
/// after the reduction over the ranks.
pub const RESIDUAL_PARTS: usize = 2;

/// The width of the warm-up grid (or the real one's, if narrower).
pub const WARM_UP_NX: u32 = 64;

/// The height of a warm-up grid that gives each of `ranks` ranks the fewest rows it may have.
pub fn warm_up_rows(ranks: usize) -> u32 {
    3 * ranks as u32 + 2
}

/// Returns once every rank of `comm` has called it: a one-element `all_reduce`, waited for.
fn barrier(ctx: &Context, comm: &Communicator) -> Result<(), BoxError> {
    let stream = Stream::non_blocking(ctx)?;
    let norm = DeviceBuffer::<f32>::zeros(&stream, 1)?;
    let mut total = DeviceBuffer::<f32>::zeros(&stream, 1)?;
    stream.synchronize()?;
    Residual::new(ctx)?
        .run(ResidualParams {
            comm,
            norm: &norm,
            total: &mut total,
        })?
        .wait()?;
    Ok(())
}

/// The CPU reference: `iterations` Jacobi iterations of the whole grid (all cores), as a
/// plain solver writes them: every interior cell from its four neighbours, then the top and
/// bottom halo rows set to the periodic images of the last and first interior rows. Returns
/// the interior rows `1..ny-1` and the last iteration's residual.
pub fn reference(nx: u32, ny: u32, iterations: u32) -> (Vec<f32>, f64) {
    let (w, h) = (nx as usize, ny as usize);
    let mut grid = initial_rows(nx, ny, 1, h - 2);
    let mut next = grid.clone();
    let mut residual = 0.0f64;
    for _ in 0..iterations {
        let src = &grid;
        par_chunks(&mut next[w..(h - 1) * w], w, |first, rows| {
            for (k, row) in rows.chunks_mut(w).enumerate() {
                let y = first / w + k + 1;
                let center = &src[y * w..(y + 1) * w];
                host::row_update(
                    center,
                    &src[(y - 1) * w..y * w],
                    &src[(y + 1) * w..(y + 2) * w],
                    Some(row),
                );
            }
        });
        residual = next[w..(h - 1) * w]
            .chunks(w)
            .zip(grid[w..(h - 1) * w].chunks(w))
            .flat_map(|(new, old)| new[1..w - 1].iter().zip(&old[1..w - 1]))
            .map(|(n, o)| f64::from(n - o).powi(2))
            .sum::<f64>()
            .sqrt();
        let (last, first) = (
            next[(h - 2) * w..(h - 1) * w].to_vec(),
            next[w..2 * w].to_vec(),
        );
        next[..w].copy_from_slice(&last);
        next[(h - 1) * w..].copy_from_slice(&first);
        std::mem::swap(&mut grid, &mut next);
    }
    (grid[w..(h - 1) * w].to_vec(), residual)
}

/// What one rank of a run reports.
#[derive(Debug)]
pub struct RankOutcome {
    /// This rank.
    pub rank: usize,
    /// The number of ranks.
    pub ranks: usize,
    /// Backend, checks and timings.
    pub report: Report,
    /// The multi-rank solve.
    pub solved: Solved,
    /// The single-rank solve of the whole grid, unless skipped.
    pub single: Option<Solved>,
}

/// One rank of a run: the solve over `comm`, then the checks; `single_rank` makes the
/// one-rank communicator of the single-rank run.
pub fn run_rank(
    ctx: &Context,
    comm: &Communicator,
    args: &JacobiMultiArgs,
    single_rank: impl FnOnce() -> Result<Communicator, BoxError>,
) -> Result<RankOutcome, BoxError> {
    args.validate()?;
    let (rank, size) = (comm.rank(), comm.size());
    let mut report = Report::new(ctx);
    let start = Instant::now();
    // One rank has no neighbour to store into: the single-rank check and a one-rank run take
    // the NCCL step (the same values bit for bit).
    let solved = if args.exchange == Exchange::Onesided && size > 1 {
        onesided::solve(ctx, comm, args, rank == 0)?
    } else {
        solve(ctx, comm, args, rank == 0)?
    };
    report.timings.add(
        "solve",
        start.elapsed(),
        format!(
            "{} ranks: {} iterations, {:.4} ms per iteration",
            size,
            solved.iterations,
            solved.ms_per_iteration()
        ),
    );
    let (first, chunk) = (solved.first_row, solved.block.len() / args.nx as usize);
    let rows_of = |whole: &[f32]| {
        let w = args.nx as usize;
        whole[(first - 1) * w..(first - 1 + chunk) * w].to_vec()
    };

    let single = if args.no_single_rank {
        None
    } else {
        let start = Instant::now();
        let one = single_rank()?;
        let mut single_args = args.clone();
        single_args.trace = None;
        let whole = solve(ctx, &one, &single_args, false)?;
        report.timings.add(
            "single rank",
            start.elapsed(),
            format!(
                "the whole grid on this rank's device: {:.4} ms per iteration",
                whole.ms_per_iteration()
            ),
        );
        report.checks.push(Check::at_most(
            format!(
                "rows {first}..{} vs the same grid on one rank",
                first + chunk
            ),
            "max |error|",
            max_abs_diff(&solved.block, &rows_of(&whole.block)),
            1e-6,
        ));
        report.checks.push(Check::at_most(
            "residual vs one rank's",
            "relative difference",
            (solved.residual - whole.residual).abs() / whole.residual.max(f64::MIN_POSITIVE),
            1e-4,
        ));
        Some(whole)
    };

    let updates = f64::from(args.nx) * f64::from(args.ny) * f64::from(args.iterations);
    let start = Instant::now();
    let note = if args.reference.full(updates) {
        let (want, residual) = reference(args.nx, args.ny, args.iterations);
        report.checks.push(Check::at_most(
            format!("rows {first}..{} vs a CPU solver", first + chunk),
            "max |error|",
            max_abs_diff(&solved.block, &rows_of(&want)),
            1e-5,
        ));
        report.checks.push(Check::at_most(
            "residual vs the CPU solver's",
            "relative difference",
            (solved.residual - residual).abs() / residual.max(f64::MIN_POSITIVE),
            1e-3,
        ));
        format!(
            "{} iterations, {} CPU threads",
            args.iterations,
            cpu_threads()
        )
    } else {
        format!(
            "skipped: {updates:.1e} cell updates exceed the budget of {REFERENCE_BUDGET:.0e} \
             (--reference full forces it)"
        )
    };
    report.timings.add("CPU reference", start.elapsed(), note);
    report.checks.push(Check {
        name: "residual is finite and falls".to_owned(),
        detail: format!(
            "last {:.6e}, step before {:.6e}",
            solved.residual, solved.delayed_residual
        ),
        passed: solved.residual.is_finite()
            && (args.iterations <= 2 || solved.residual <= solved.delayed_residual),
    });
    report.checks.push(Check::no_races(ctx));
    report.notes.push(format!(
        "{}x{} grid, {} iterations on {} rank(s): {:.4} ms per iteration (rank {rank}'s \
         rows {first}..{}), residual {:.6e}",
        args.ny,
        args.nx,
        args.iterations,
        size,
        solved.ms_per_iteration(),
        first + chunk,
        solved.residual
    ));
    if let Some(whole) = &single {
        let (t1, tn) = (whole.ms_per_iteration(), solved.ms_per_iteration());
        report.notes.push(format!(
            "one rank: {t1:.4} ms per iteration; speedup {:.2}, parallel efficiency {:.1}%",
            t1 / tn,
            100.0 * t1 / (size as f64 * tn)
        ));
    }

    if let Some(path) = &args.trace {
        // Every rank profiles the step (it communicates); rank 0 writes the trace.
        let stream = Stream::non_blocking(ctx)?;
        let (first, chunk) = decompose(args.ny, size, rank);
        let init = initial_rows(args.nx, args.ny, first, chunk);
        let (mut a, mut b) = (
            Grid::upload(&stream, &init, args.nx as usize, "a")?,
            Grid::upload(&stream, &init, args.nx as usize, "b")?,
        );
        let mut norm = DeviceBuffer::<f32>::zeros(&stream, RESIDUAL_PARTS)?;
        let mut total = DeviceBuffer::<f32>::zeros(&stream, RESIDUAL_PARTS)?;
        stream.synchronize()?;
        let mut pipeline = JacobiStep::new(ctx)?;
        let rows = u32::try_from(chunk - 2)?;
        let start = Instant::now();
        pipeline
            .run(step_params(
                comm, args.nx, rows, &mut a, &mut b, &mut norm, &mut total,
            ))?
            .wait()?;
        let profile = pipeline.profile(step_params(
            comm, args.nx, rows, &mut a, &mut b, &mut norm, &mut total,
        ))?;
        if rank == 0 {
            report.write_trace(path, &profile)?;
            report
                .timings
                .add("trace", start.elapsed(), path.display().to_string());
        }
    }
    Ok(RankOutcome {
        rank,
        ranks: size,
        report,
        solved,
        single,
    })
}

/// `--exchange peer`: every device driven by this process (see [`peer`]), checked against
/// the same kernels on one device and, when affordable, the CPU solver. One outcome, whose
/// block is the whole grid.
pub fn run_peer(devices: &[Context], args: &JacobiMultiArgs) -> Result<RankOutcome, BoxError> {
    let mut report = Report::new(&devices[0]);
    let start = Instant::now();
    let solved = peer::solve(devices, args)?;
    report.timings.add(
        "solve",
        start.elapsed(),
        format!(
            "{} devices, one process: {} iterations, {:.4} ms per iteration",
            devices.len(),
            solved.iterations,
            solved.ms_per_iteration()
        ),
    );
    let single = if args.no_single_rank {
        None
    } else {
        let start = Instant::now();
        let whole = peer::solve(&devices[..1], args)?;
        report.timings.add(
            "one device",
            start.elapsed(),
            format!("{:.4} ms per iteration", whole.ms_per_iteration()),
        );
        report.checks.push(Check::at_most(
            "every row vs the same grid on one device",
            "max |error|",
            max_abs_diff(&solved.block, &whole.block),
            0.0,
        ));
        report.checks.push(Check::at_most(
            "residual vs one device's",
            "relative difference",
            (solved.residual - whole.residual).abs() / whole.residual.max(f64::MIN_POSITIVE),
            1e-4,
        ));
        Some(whole)
    };
    let updates = f64::from(args.nx) * f64::from(args.ny) * f64::from(args.iterations);
    if args.reference.full(updates) {
        let start = Instant::now();
        let (want, residual) = reference(args.nx, args.ny, args.iterations);
        report.checks.push(Check::at_most(
            "every row vs a CPU solver",
            "max |error|",
            max_abs_diff(&solved.block, &want),
            1e-5,
        ));
        report.checks.push(Check::at_most(
            "residual vs the CPU solver's",
            "relative difference",
            (solved.residual - residual).abs() / residual.max(f64::MIN_POSITIVE),
            1e-3,
        ));
        report.timings.add(
            "CPU reference",
            start.elapsed(),
            format!("{} iterations", args.iterations),
        );
    }
    report.checks.push(Check {
        name: "residual is finite".to_owned(),
        detail: format!("last {:.6e}", solved.residual),
        passed: solved.residual.is_finite(),
    });
    for ctx in devices {
        report.checks.push(Check::no_races(ctx));
    }
    report.notes.push(format!(
        "{}x{} grid, {} iterations on {} device(s) of one process: {:.4} ms per iteration, \
         residual {:.6e}",
        args.ny,
        args.nx,
        args.iterations,
        devices.len(),
        solved.ms_per_iteration(),
        solved.residual
    ));
    Ok(RankOutcome {
        rank: 0,
        ranks: devices.len(),
        report,
        solved,
        single,
    })
}

/// The devices `--exchange peer` runs on: the first `--gpus` CUDA devices (all there are by
/// default), or `--ranks` simulated CPU devices (2 by default).
fn peer_devices(args: &JacobiMultiArgs, probe: &Context) -> Result<Vec<Context>, BoxError> {
    match probe.backend() {
        Backend::Cuda => {
            let available = Device::count()?;
            let n = args.gpus.or(args.ranks).map_or(available, |n| n as usize);
            if n > available {
                return Err(format!("--gpus {n} but {available} GPU(s) are visible").into());
            }
            Ok((0..n).map(Context::cuda).collect::<Result<_, _>>()?)
        }
        Backend::Cpu => {
            let n = args.ranks.or(args.gpus).unwrap_or(2) as usize;
            Ok(if probe.is_checked() {
                Context::cpu_checked_devices(n)
            } else {
                Context::cpu_devices(n)
            })
        }
    }
}

/// The CSV line of `--csv`.
pub fn csv_line(args: &JacobiMultiArgs, outcome: &RankOutcome) -> String {
    format!(
        "jacobi_multi,{},{},{},{},{:.6},{}",
        args.nx,
        args.ny,
        args.iterations,
        outcome.ranks,
        outcome.solved.ms_per_iteration(),
        outcome
            .single
            .as_ref()
            .map_or(String::new(), |s| format!("{:.6}", s.ms_per_iteration()))
    )
}

/// Runs `ranks` simulated ranks as threads on the CPU backend (checked: the race detector
/// on), each with its own context and pipeline; the outcomes in rank order.
pub fn run_cpu_ranks(
    args: &JacobiMultiArgs,
    ranks: usize,
    checked: bool,
) -> Result<Vec<RankOutcome>, BoxError> {
    let comms = Communicator::cpu_ranks(ranks)?;
    // One-sided windows are shared by simulated ranks on devices made together.
    let mut devices = match (args.exchange, checked) {
        (Exchange::Onesided, true) => Context::cpu_checked_devices(ranks),
        (Exchange::Onesided, false) => Context::cpu_devices(ranks),
        _ => Vec::new(),
    }
    .into_iter();
    std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                let device = devices.next();
                scope.spawn(move || {
                    let ctx = match device {
                        Some(ctx) => ctx,
                        None if checked => Context::cpu_checked(),
                        None => Context::cpu(),
                    };
                    run_rank(&ctx, &comm, args, || {
                        Ok(Communicator::cpu_ranks(1)?.remove(0))
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err("a rank's thread panicked".into()))
            })
            .collect()
    })
}

/// This process's rank on its GPU (one process per rank, from the launcher's variables).
pub fn run_cuda_rank(args: &JacobiMultiArgs) -> Result<RankOutcome, BoxError> {
    let me = RankInfo::from_env_or_single()?;
    if let Some(ranks) = args.ranks
        && ranks as usize != me.world_size
    {
        return Err(format!(
            "--ranks {ranks} but the launcher started {} process(es); on GPUs the ranks are \
             processes: `gpu-pipeline-launch -n {ranks} -- jacobi_multi ...`",
            me.world_size
        )
        .into());
    }
    let devices = Device::count()?;
    let ctx = Context::cuda(me.local_rank % devices.max(1))?;
    let comm = Communicator::from_env(&ctx)?;
    run_rank(&ctx, &comm, args, || {
        let id = UniqueId::new()?;
        Ok(Communicator::nccl(nccl::Communicator::init(
            &ctx, 1, 0, &id,
        )?))
    })
}

/// `--gpus N` outside a launch: this program again, as N ranks of one launch (its output
/// forwarded with a `[rank R]` prefix); its exit code.
fn launch_ranks(gpus: u64) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            return finish(Err(
                format!("cannot find this program to launch it: {e}").into()
            ));
        }
    };
    // Every flag but `--gpus N` (or `--gpus=N`), which the ranks must not act on again.
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut skip = false;
    for arg in std::env::args_os().skip(1) {
        if std::mem::take(&mut skip) {
            continue;
        }
        match arg.to_str() {
            Some("--gpus") => skip = true,
            Some(a) if a.starts_with("--gpus=") => {}
            _ => args.push(arg),
        }
    }
    match Launch::new(gpus as usize, exe).args(args).run() {
        Ok(report) if report.success() => ExitCode::SUCCESS,
        Ok(report) => {
            eprintln!("error: a rank failed\n{}", report.summary());
            ExitCode::FAILURE
        }
        Err(e) => finish(Err(e.into())),
    }
}

/// The program: ranks as processes on GPUs, as threads on the CPU backend; rank 0 prints
/// the report (and the CSV line), every rank's checks decide the exit code.
pub fn main() -> ExitCode {
    let args: JacobiMultiArgs = parse_args(JacobiMultiArgs::validate);
    if let Some(dot) = args.dot() {
        print!("{dot}");
        return ExitCode::SUCCESS;
    }
    let probe = match Context::auto() {
        Ok(ctx) => ctx,
        Err(e) => return finish(Err(e.into())),
    };
    let outcomes = match (args.exchange, probe.backend()) {
        (Exchange::Peer, _) => {
            let devices = peer_devices(&args, &probe);
            drop(probe);
            devices.and_then(|devices| run_peer(&devices, &args).map(|outcome| vec![outcome]))
        }
        (Exchange::Nccl | Exchange::Onesided, Backend::Cuda) => {
            drop(probe);
            if let Some(gpus) = args.gpus
                && RankInfo::from_env().is_err()
                && gpus > 1
            {
                return launch_ranks(gpus);
            }
            run_cuda_rank(&args).map(|outcome| vec![outcome])
        }
        (Exchange::Nccl | Exchange::Onesided, Backend::Cpu) => {
            let ranks = args.ranks.or(args.gpus).unwrap_or(2) as usize;
            println!(
                "jacobi_multi: {} ranks as threads on the CPU backend{}",
                ranks,
                if probe.is_checked() {
                    " (checked: race detector on)"
                } else {
                    ""
                }
            );
            run_cpu_ranks(&args, ranks, probe.is_checked())
        }
    };
    let outcomes = match outcomes {
        Ok(outcomes) => outcomes,
        Err(e) => return finish(Err(e)),
    };
    let failed: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            o.report
                .first_failure()
                .map(|c| format!("rank {}: {}: {}", o.rank, c.name, c.detail))
        })
        .collect();
    let mut outcomes = outcomes.into_iter();
    let Some(first) = outcomes.next() else {
        return finish(Err("no rank ran".into()));
    };
    for other in outcomes {
        println!(
            "rank {}: {} checks, {}",
            other.rank,
            other.report.checks.len(),
            if other.report.passed() {
                "all passed"
            } else {
                "FAILED"
            }
        );
    }
    if first.rank == 0 {
        println!(
            "jacobi_multi: {}x{}, {} iterations on {} rank(s): replays took {}",
            args.ny,
            args.nx,
            args.iterations,
            first.ranks,
            format_duration(first.solved.replay_time)
        );
        if args.csv {
            println!("{}", csv_line(&args, &first));
        }
    }
    let code = finish(Ok(first.report));
    if failed.is_empty() {
        code
    } else {
        for failure in failed {
            eprintln!("error: {failure}");
        }
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_dealt_out_like_nvidias_jacobi() {
        // 10 interior rows over 4 ranks: 2, 2, 3, 3.
        let blocks: Vec<(usize, usize)> = (0..4).map(|r| decompose(12, 4, r)).collect();
        assert_eq!(blocks, [(1, 2), (3, 2), (5, 3), (8, 3)]);
        // Even: every rank the same.
        assert_eq!(decompose(10, 2, 1), (5, 4));
        assert!(rows_per_rank(64, 12, 4).is_err());
        assert!(rows_per_rank(64, 14, 4).is_ok());
        // 32768 interior rows of 65536 are 2^31 elements: too many for one block, not for two.
        let err = rows_per_rank(65536, 32770, 1).unwrap_err();
        assert!(err.contains("use 2 or more GPUs"), "{err}");
        assert!(rows_per_rank(65536, 32770, 2).is_ok());
    }

    /// The kernels' CPU implementations over a block split in two equal the CPU solver on the
    /// whole grid, bit for bit, iteration by iteration.
    #[test]
    fn the_split_kernels_match_the_whole_grid_solver() {
        let (nx, ny) = (9u32, 12u32);
        let w = nx as usize;
        let init = initial_rows(nx, ny, 1, 10);
        // One rank: block rows 1..=10, halos rows 0 and 11.
        let mut a = init.clone();
        let mut b = init.clone();
        let mut residual = 0.0f32;
        for _ in 0..6 {
            let (src, dst) = (&a, &mut b);
            let rows = 8u32;
            let (mut top, mut bot) = (dst[w..2 * w].to_vec(), dst[10 * w..11 * w].to_vec());
            let mut norm = [0.0f32; RESIDUAL_PARTS];
            host::jacobi_edges(
                nx,
                rows,
                &src[..w],
                &src[w..2 * w],
                &src[2 * w..10 * w],
                &src[10 * w..11 * w],
                &src[11 * w..],
                &mut top,
                &mut bot,
                &mut norm[1..],
            );
            let mut mid = dst[2 * w..10 * w].to_vec();
            host::jacobi_mid(
                nx,
                rows,
                &src[w..2 * w],
                &src[2 * w..10 * w],
                &src[10 * w..11 * w],
                &mut mid,
                &mut norm[..1],
            );
            residual = norm.iter().sum();
            dst[w..2 * w].copy_from_slice(&top);
            dst[2 * w..10 * w].copy_from_slice(&mid);
            dst[10 * w..11 * w].copy_from_slice(&bot);
            // The exchange with itself: periodic halos.
            let (last, first) = (dst[10 * w..11 * w].to_vec(), dst[w..2 * w].to_vec());
            dst[..w].copy_from_slice(&last);
            dst[11 * w..].copy_from_slice(&first);
            std::mem::swap(&mut a, &mut b);
        }
        let (want, want_residual) = reference(nx, ny, 6);
        let relative = (f64::from(residual).sqrt() - want_residual).abs() / want_residual;
        assert!(relative < 1e-5, "residual {residual} vs {want_residual}^2");
        let got: Vec<f32> = a[w..11 * w].to_vec();
        for (k, (g, w_)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w_.to_bits(), "cell {k}: {g} vs {w_}");
        }
    }
}
