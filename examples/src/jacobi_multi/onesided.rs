//! `--exchange onesided`: one process per GPU, as with `nccl`, but no NCCL kernel moves the
//! halos: each rank's kernel stores its first and last rows straight into its neighbours'
//! halo rows, in memory the neighbours exported to it ([`Window`]: CUDA IPC handles passed
//! through the communicator, mapped over NVLink), as NVIDIA's NVSHMEM variants do between
//! processes. Signals in device memory order the exchange, inside the captured step:
//!
//! ```text
//! a -> b:  wait read(b)   (the neighbours read what this rank stored into their b halos)
//!          wait written(a) (the neighbours stored into this rank's a halos)
//!          jacobi_window a -> b, edge rows into the neighbours' b halos, residual into norm[0]
//!          signal written(b) to the neighbours; signal read(a) to the neighbours
//! b -> a:  the same with a and b exchanged, residual into norm[1]
//! ```
//!
//! Each rank's `a` and `b` halos are one window each (`[top row | bottom row]`); its block of
//! rows is an ordinary buffer. Before the first step each rank sets its own `a` halos (the
//! initial grid's rows, as the other modes start) and tells its neighbours they are written,
//! so the first wait finds what every later one finds. The residual of the last iteration is
//! reduced over the ranks with one `all_reduce` after the replays. On one rank there is no
//! neighbour to store into: the mode needs two ranks or more (the single-rank check runs the
//! `nccl` step, whose results are the same bit for bit).

use std::time::Instant;

use gpu_pipeline::collective::ReduceOp;
use gpu_pipeline::{
    CommStage, Communicator, Context, CpuKernel, DeviceBuffer, LaunchConfig, Module, Stream,
    TypedKernel, Window,
};

use super::{JacobiMultiArgs, Solved, barrier, decompose, initial_rows};
use crate::common::{BoxError, progress};

/// `jacobi_window`'s signature (`examples/kernels/jacobi_onesided.cu`).
type JacobiWindow = (
    u32,
    u32,
    &'static [f32],
    &'static [f32],
    &'static [f32],
    &'static mut [f32],
    &'static mut [f32],
    &'static mut [f32],
    &'static mut [f32],
);

/// What `jacobi_window` computes, on the CPU backend: every row of `block` into `out` (its
/// halos above the first row and below the last), the first row also into `to_up` and the last
/// into `to_down`, the squared residual added to `norm[0]`; columns 0 and nx - 1 untouched.
/// The same operations in the same order as the kernel (no fused multiply-add), so each
/// cell's value is the kernel's bit for bit.
#[allow(clippy::too_many_arguments)]
pub fn jacobi_window_on_cpu(
    nx: u32,
    rows: u32,
    halo_top: &[f32],
    block: &[f32],
    halo_bot: &[f32],
    out: &mut [f32],
    to_up: &mut [f32],
    to_down: &mut [f32],
    norm: &mut [f32],
) {
    let (w, rows) = (nx as usize, rows as usize);
    let mut residual = 0.0f32;
    for r in 0..rows {
        let center = &block[r * w..(r + 1) * w];
        let up = if r == 0 {
            halo_top
        } else {
            &block[(r - 1) * w..r * w]
        };
        let down = if r + 1 == rows {
            halo_bot
        } else {
            &block[(r + 1) * w..(r + 2) * w]
        };
        for x in 1..w.saturating_sub(1) {
            let value = 0.25 * (((center[x + 1] + center[x - 1]) + down[x]) + up[x]);
            out[r * w + x] = value;
            if r == 0 {
                to_up[x] = value;
            }
            if r + 1 == rows {
                to_down[x] = value;
            }
            let diff = value - center[x];
            residual += diff * diff;
        }
    }
    norm[0] += residual;
}

fn jacobi_window(ctx: &Context) -> Result<TypedKernel<JacobiWindow>, BoxError> {
    let module = Module::load_ptx(ctx, include_str!("../../kernels/jacobi_onesided.ptx"))?;
    // SAFETY: jacobi_window(unsigned nx, unsigned rows, const float* halo_top, const float*
    // block, const float* halo_bot, float* out, float* to_up, float* to_down, float* norm)
    // indexes the halos and `to_*` below nx, `block` and `out` below nx * rows and `norm` at 0
    // only: `iteration` below passes buffers of those lengths.
    let kernel = unsafe { module.function("jacobi_window")?.typed::<JacobiWindow>()? };
    Ok(kernel.with_host(CpuKernel::new(jacobi_window_on_cpu)))
}

/// The distinct neighbours of `rank` of `size` (periodic): up, then down when it differs.
fn neighbours(rank: usize, size: usize) -> Vec<usize> {
    let (up, down) = ((rank + size - 1) % size, (rank + 1) % size);
    if up == down { vec![up] } else { vec![up, down] }
}

/// One iteration `from -> to` of this rank's block: waits, the kernel storing the edge rows
/// into the neighbours' `to` halos, signals.
#[allow(clippy::too_many_arguments)]
fn iteration(
    s: &Stream,
    kernel: &TypedKernel<JacobiWindow>,
    (nx, rows): (usize, usize),
    peers: &[usize],
    from: (&Window<f32>, &DeviceBuffer<f32>),
    to: (&mut Window<f32>, &mut DeviceBuffer<f32>),
    norm: &mut DeviceBuffer<f32>,
    slot: usize,
) -> Result<(), BoxError> {
    let ((halos, block), (next_halos, next_block)) = (from, to);
    for &p in peers {
        next_halos.wait_read(s, p)?;
    }
    for &p in peers {
        halos.wait_written(s, p)?;
    }
    {
        // My first row goes to `up`'s bottom halo, my last to `down`'s top halo.
        let (_, mut targets) = next_halos.split_mut();
        let (to_up, to_down) = match targets.as_mut_slice() {
            [both] => {
                let (top, bottom) = both.split_at_mut(nx)?;
                (bottom, top)
            }
            [up_halos, down_halos] => (
                up_halos.slice_mut(nx..2 * nx)?,
                down_halos.slice_mut(0..nx)?,
            ),
            _ => return Err("a rank has one or two neighbours".into()),
        };
        let local = halos.local();
        let config = LaunchConfig::new(
            ((nx as u32).div_ceil(32), (rows as u32).div_ceil(32)),
            (32u32, 32u32),
        );
        kernel.launch(
            s,
            config,
            (
                nx as u32,
                rows as u32,
                &local.slice(0..nx)?,
                block,
                &local.slice(nx..2 * nx)?,
                next_block,
                &mut { to_up },
                &mut { to_down },
                &mut norm.slice_mut(slot..slot + 1)?,
            ),
        )?;
    }
    for &p in peers {
        next_halos.signal_written(s, p)?;
    }
    for &p in peers {
        halos.signal_read(s, p)?;
    }
    Ok(())
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
    let kernel = jacobi_window(ctx)?;
    let peers = neighbours(rank, size);
    let mut a_halos = Window::<f32>::new(comm, &stream, 2 * nx, &peers)?;
    let mut b_halos = Window::<f32>::new(comm, &stream, 2 * nx, &peers)?;
    let block = |name: &str| -> Result<DeviceBuffer<f32>, BoxError> {
        Ok(DeviceBuffer::from_slice(&stream, &init[nx..(chunk + 1) * nx])?.named(name))
    };
    let (mut a, mut b) = (block("a_block")?, block("b_block")?);
    let mut norm = DeviceBuffer::<f32>::zeros(&stream, 2)?.named("norm");
    // This rank's `a` halos are the initial grid's rows; the neighbours learn they are
    // written (the protocol's state after every step from here on).
    let mut halos = init[..nx].to_vec();
    halos.extend_from_slice(&init[(chunk + 1) * nx..]);
    let staged = DeviceBuffer::from_slice(&stream, &halos)?;
    stream.copy_dtod(&staged, a_halos.local_mut())?;
    for &p in &peers {
        a_halos.wait_read(&stream, p)?;
        a_halos.signal_written(&stream, p)?;
    }
    stream.synchronize()?;

    let shape = (nx, chunk);
    // The capture always ends, also when the body fails.
    stream.begin_capture(gpu_pipeline::CaptureMode::ThreadLocal)?;
    let body = (|| -> Result<(), BoxError> {
        stream.memset_u32(&mut norm, 0)?;
        let s = &stream;
        iteration(
            s,
            &kernel,
            shape,
            &peers,
            (&a_halos, &a),
            (&mut b_halos, &mut b),
            &mut norm,
            0,
        )?;
        iteration(
            s,
            &kernel,
            shape,
            &peers,
            (&b_halos, &b),
            (&mut a_halos, &mut a),
            &mut norm,
            1,
        )
    })();
    let graph = stream.end_capture();
    body?;
    let graph = graph?;
    let exec = graph.instantiate()?;
    exec.upload(&stream)?;
    stream.synchronize()?;
    barrier(ctx, comm)?;

    let replays = args.iterations / 2;
    let bar = progress(
        u64::from(args.iterations),
        args.quiet || !show_progress,
        "iterations",
    );
    let tick = (replays / 100).max(1);
    let start = Instant::now();
    for r in 0..replays {
        exec.launch(&stream)?;
        if !bar.is_hidden() && (r + 1) % tick == 0 {
            stream.synchronize()?;
            bar.inc(2 * u64::from(tick));
        }
    }
    stream.synchronize()?;
    let replay_time = start.elapsed();
    bar.finish_and_clear();
    drop(exec);
    drop(graph);

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
