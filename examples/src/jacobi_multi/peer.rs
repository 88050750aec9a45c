//! `--exchange peer`: the same solve with every GPU driven by one process, as NVIDIA's
//! `multi_threaded_p2p_opt` does. Each device's kernel computes its block and stores its
//! first and last rows straight into its neighbours' halo buffers over NVLink (`peer(..)`);
//! no copy, no NCCL. The macro orders each device's next iteration after its neighbours'
//! stores into its halos (and their reads of the halos it stores into), with events across
//! devices, and one captured graph spans every device. Every iteration computes its residual,
//! as NVIDIA's does (each device sums its block's into its `norm`: the first iteration of a
//! step into element 0, the second into element 1); the last one is summed over the devices
//! on the host at the end.
//!
//! A device array's length is a constant of the pipeline, so there is one pipeline per
//! device count this example offers ([`DEVICE_COUNTS`]).

use std::time::{Duration, Instant};

use gpu_pipeline::{Context, DeviceBuffer, Stream, gpu_pipeline};

use super::{
    JacobiMultiArgs, Solved, WARM_UP_NX, decompose, initial_rows, rows_per_rank, warm_up_rows,
};
use crate::common::BoxError;

/// The device counts `--exchange peer` runs on.
pub const DEVICE_COUNTS: [usize; 4] = [1, 2, 4, 8];

/// Every device's grids, as the arrays the pipeline's params are: for the two grids `a` and
/// `b`, the top halo rows, the blocks and the bottom halo rows (element `d` on device `d`),
/// and each device's residual.
struct Grids {
    streams: Vec<Stream>,
    first: usize,
    a: [Vec<DeviceBuffer<f32>>; 3],
    b: [Vec<DeviceBuffer<f32>>; 3],
    norm: Vec<DeviceBuffer<f32>>,
}

/// One pipeline per device count (see the module docs).
macro_rules! peer_pipeline {
    ($pipeline:ident, $params:ident, $solve:ident, $of:ident, $n:literal) => {
        gpu_pipeline! {
            /// Two Jacobi iterations (`a -> b -> a`) of every device's block, each device's
            /// edge rows stored into its neighbours' halos by its own kernel.
            pub pipeline $pipeline {
                devices { gpu[$n] }
                streams { main on gpu[0], work[$n] on gpu[..] }
                unsafe kernels jacobi = ptx(include_str!("../../kernels/jacobi_multi.ptx")) {
                    fn jacobi_peer(nx: u32, rows: u32, halo_top: &[f32; nx],
                                   block: &[f32; nx * rows], halo_bot: &[f32; nx],
                                   out: &mut [f32; nx * rows], to_up: &mut [f32; nx],
                                   to_down: &mut [f32; nx], norm: &mut [f32; 1])
                        cpu = crate::jacobi_multi::host::jacobi_peer;
                }
                params {
                    nx: u32,
                    low: u32,
                    low_devices: usize,
                    a_top: &mut [DeviceBuffer<f32>] on gpu[..],
                    a_block: &mut [DeviceBuffer<f32>] on gpu[..],
                    a_bot: &mut [DeviceBuffer<f32>] on gpu[..],
                    b_top: &mut [DeviceBuffer<f32>] on gpu[..],
                    b_block: &mut [DeviceBuffer<f32>] on gpu[..],
                    b_bot: &mut [DeviceBuffer<f32>] on gpu[..],
                    norm: &mut [DeviceBuffer<f32>] on gpu[..],
                }
                for d in 0..$n {
                    stage ab on work[d] {
                        fill norm[d] = 0.0;
                        launch jacobi::jacobi_peer(nx, low + u32::from(d >= low_devices),
                                                   a_top[d], a_block[d], a_bot[d], b_block[d],
                                                   b_bot[(d + $n - 1) % $n], b_top[(d + 1) % $n],
                                                   norm[d][0..1])
                            grid ((nx - 2).div_ceil(32), (low + 1).div_ceil(32)) block (32u32, 32u32)
                            peer(b_bot, b_top);
                    }
                }
                for d in 0..$n {
                    stage ba on work[d] {
                        launch jacobi::jacobi_peer(nx, low + u32::from(d >= low_devices),
                                                   b_top[d], b_block[d], b_bot[d], a_block[d],
                                                   a_bot[(d + $n - 1) % $n], a_top[(d + 1) % $n],
                                                   norm[d][1..2])
                            grid ((nx - 2).div_ceil(32), (low + 1).div_ceil(32)) block (32u32, 32u32)
                            peer(a_bot, a_top);
                    }
                }
            }
        }

        /// The step's params over `g`.
        fn $of(g: &mut Grids, nx: u32, (low, low_devices): (u32, usize)) -> $params<'_> {
            let Grids {
                a: [a_top, a_block, a_bot],
                b: [b_top, b_block, b_bot],
                norm,
                ..
            } = g;
            $params {
                nx,
                low,
                low_devices,
                a_top,
                a_block,
                a_bot,
                b_top,
                b_block,
                b_bot,
                norm,
            }
        }

        /// The solve on `devices` (see [`solve`]).
        fn $solve(devices: &[Context], args: &JacobiMultiArgs) -> Result<Solved, BoxError> {
            let devices: &[Context; $n] = devices.try_into()?;
            let rows = split(args.ny, $n);
            let mut pipeline = $pipeline::new(devices)?;
            // One eager step, on a small grid split the same way: peer access and every
            // kernel's first launch out of the clock, the real grid uploaded once.
            let small = JacobiMultiArgs {
                nx: WARM_UP_NX.min(args.nx),
                ny: warm_up_rows($n),
                ..args.clone()
            };
            let mut g = upload(devices, &small)?;
            pipeline.run($of(&mut g, small.nx, split(small.ny, $n)))?.wait()?;
            drop(g);
            let mut g = upload(devices, args)?;
            let origin = Stream::non_blocking(&devices[0])?;
            let replay_time = {
                let mut graph = pipeline.capture($of(&mut g, args.nx, rows))?;
                if let Some(exec) = graph.exec() {
                    exec.upload(&origin)?;
                }
                for d in devices.iter() {
                    d.synchronize()?;
                }
                let start = Instant::now();
                for _ in 0..args.iterations / 2 {
                    graph.launch()?;
                }
                graph.synchronize()?;
                start.elapsed()
            };
            finish(&g, args, replay_time)
        }
    };
}

peer_pipeline!(JacobiPeer1, JacobiPeer1Params, solve_1, params_1, 1);
peer_pipeline!(JacobiPeer2, JacobiPeer2Params, solve_2, params_2, 2);
peer_pipeline!(JacobiPeer4, JacobiPeer4Params, solve_4, params_4, 4);
peer_pipeline!(JacobiPeer8, JacobiPeer8Params, solve_8, params_8, 8);

/// Solves the grid over `devices`, all driven by this process, the halos exchanged by the
/// kernels' own stores into their neighbours' memory: the whole grid's rows and residual.
pub fn solve(devices: &[Context], args: &JacobiMultiArgs) -> Result<Solved, BoxError> {
    rows_per_rank(args.nx, args.ny, devices.len())?;
    match devices.len() {
        1 => solve_1(devices, args),
        2 => solve_2(devices, args),
        4 => solve_4(devices, args),
        8 => solve_8(devices, args),
        n => Err(format!(
            "--exchange peer runs on {DEVICE_COUNTS:?} devices, not {n}: a device array's length is a constant of the pipeline"
        )
        .into()),
    }
}

/// Rows per device: the first `low_devices` get `low`, the others `low + 1`.
fn split(ny: u32, devices: usize) -> (u32, usize) {
    let interior = ny as usize - 2;
    let low = interior / devices;
    (low as u32, devices * (low + 1) - interior)
}

/// Every device's initial block and halos, twice (`a` and `b`), and a zero residual.
fn upload(devices: &[Context], args: &JacobiMultiArgs) -> Result<Grids, BoxError> {
    let nx = args.nx as usize;
    let mut g = Grids {
        streams: Vec::new(),
        first: 1,
        a: Default::default(),
        b: Default::default(),
        norm: Vec::new(),
    };
    for (d, ctx) in devices.iter().enumerate() {
        let (first, rows) = decompose(args.ny, devices.len(), d);
        if d == 0 {
            g.first = first;
        }
        let init = initial_rows(args.nx, args.ny, first, rows);
        let stream = Stream::non_blocking(ctx)?;
        let part = |from: usize, to: usize, what: String| -> Result<DeviceBuffer<f32>, BoxError> {
            Ok(DeviceBuffer::from_slice(&stream, &init[from * nx..to * nx])?.named(&what))
        };
        for (grid, name) in [(&mut g.a, "a"), (&mut g.b, "b")] {
            grid[0].push(part(0, 1, format!("{name}_top[{d}]"))?);
            grid[1].push(part(1, rows + 1, format!("{name}_block[{d}]"))?);
            grid[2].push(part(rows + 1, rows + 2, format!("{name}_bot[{d}]"))?);
        }
        g.norm
            .push(DeviceBuffer::<f32>::zeros(&stream, 2)?.named(&format!("norm[{d}]")));
        stream.synchronize()?;
        g.streams.push(stream);
    }
    Ok(g)
}

/// Every device's block (grid `a`, where the last iteration wrote) and the residual summed
/// over the devices, as one [`Solved`] of the whole grid.
fn finish(g: &Grids, args: &JacobiMultiArgs, replay_time: Duration) -> Result<Solved, BoxError> {
    let mut block = Vec::with_capacity(args.nx as usize * (args.ny as usize - 2));
    let mut total = 0.0f64;
    for ((rows, norm), stream) in g.a[1].iter().zip(&g.norm).zip(&g.streams) {
        block.extend(rows.to_vec(stream)?);
        total += f64::from(norm.to_vec(stream)?[1]);
    }
    Ok(Solved {
        block,
        first_row: g.first,
        residual: total.sqrt(),
        delayed_residual: f64::NAN,
        replay_time,
        iterations: args.iterations,
    })
}
