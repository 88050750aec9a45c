//! One-sided halo exchange through [`Window`]s, written against the runtime API: the same
//! code runs on simulated ranks of the CPU backend (`tests/tests/onesided.rs`, in CI) and on
//! GPUs, one process per rank (`tests/tests/gpu_onesided.rs`).
//!
//! The ranks form a chain (rank `r`'s neighbours are `r - 1` and `r + 1`). Each rank's window
//! holds two halos of `n` elements: `[0, n)` written by its upper neighbour, `[n, 2n)` by its
//! lower one. Every round first adds one to the rank's `base` (`base[i] = 1000 * r + i`
//! initially), then runs `iterations` exchanges: in exchange `k`, a kernel on rank `r` stores
//! `base[i] + k` straight into each neighbour's halo, and each rank then copies its whole
//! window into slot `k` of its `history` with a kernel. After `rounds` rounds every slot must
//! hold what the neighbours' last round wrote: `1000 * p + i + rounds + k`.
//!
//! Run eagerly, or with one round captured as a graph and replayed `rounds` times (the
//! signals then replay inside the graph).
//!
//! The same exchange in the language, on a ring (`RingStep`, `RingReadFirst`): window params
//! whose launch arguments name the neighbours' parts with `on rank`, the signals derived by
//! `gpu_pipeline!`.

use gpu_pipeline::{
    Bound, Bounds, CaptureMode, Communicator, Context, CpuKernel, DeviceBuffer, LaunchConfig,
    Module, Result, Stream, TypedKernel, TypedStream, Window, gpu_pipeline,
};

/// `tests/kernels/language.ptx`: `affine` and `axpb`.
const PTX: &str = include_str!("../kernels/language.ptx");

type Affine = (u32, f32, f32, &'static [f32], &'static mut [f32]);
type Axpb = (u32, f32, f32, &'static mut [f32]);

/// Which signal a run leaves out on purpose (for the race detector to find).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Omit {
    /// Every signal is there.
    Nothing,
    /// Rank 1 reads its halos without waiting until its neighbours wrote them.
    WaitWrittenOnRank1,
    /// Rank 0 writes its neighbour's halo again without waiting until the neighbour read it.
    WaitReadOnRank0,
}

/// How a run goes.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Elements per halo.
    pub n: usize,
    /// Exchanges per round.
    pub iterations: usize,
    /// Rounds.
    pub rounds: usize,
    /// One round captured as a graph and replayed, or every round enqueued eagerly.
    pub graph: bool,
    /// A signal left out.
    pub omit: Omit,
}

/// `dst[i] = a * src[i] + b`, as `affine` computes it (no contraction into an FMA).
pub fn affine_cpu(n: u32, a: f32, b: f32, src: &[f32], dst: &mut [f32]) {
    for i in 0..n as usize {
        dst[i] = a * src[i] + b;
    }
}

/// `x[i] = a * x[i] + b`, as `axpb` computes it.
fn axpb_cpu(n: u32, a: f32, b: f32, x: &mut [f32]) {
    for v in &mut x[..n as usize] {
        *v = a * *v + b;
    }
}

struct Kernels {
    affine: TypedKernel<Affine>,
    axpb: TypedKernel<Axpb>,
}

fn kernels(ctx: &Context) -> Result<Kernels> {
    let module = Module::load_ptx(ctx, PTX)?;
    let bounds = || Bounds::new().names(&["n", "a", "b", "src", "dst"]);
    // SAFETY: affine(unsigned n, float a, float b, const float* src, float* dst) reads src
    // and writes dst below n; axpb(unsigned n, float a, float b, float* x) writes x below n.
    let affine = unsafe {
        module.function("affine")?.typed_with_bounds::<Affine>(
            bounds()
                .buffer(3, Bound::param(0))
                .buffer(4, Bound::param(0)),
        )?
    }
    .with_host(CpuKernel::new(affine_cpu));
    // SAFETY: as above.
    let axpb = unsafe {
        module.function("axpb")?.typed_with_bounds::<Axpb>(
            Bounds::new()
                .names(&["n", "a", "b", "x"])
                .buffer(3, Bound::param(0)),
        )?
    }
    .with_host(CpuKernel::new(axpb_cpu));
    Ok(Kernels { affine, axpb })
}

fn config(n: usize) -> LaunchConfig {
    LaunchConfig::new((n as u32).div_ceil(256), 256)
}

/// One rank's part: makes its window, runs the plan, and returns its `history` (`iterations`
/// slots of `2n` elements).
pub fn chain_rank(ctx: &Context, comm: &Communicator, plan: Plan) -> Result<Vec<f32>> {
    chain_rank_timed(ctx, comm, plan).map(|(history, _)| history)
}

/// [`chain_rank`], with the wall time of the rounds (from the first launch or enqueue to the
/// synchronize after the last).
pub fn chain_rank_timed(
    ctx: &Context,
    comm: &Communicator,
    plan: Plan,
) -> Result<(Vec<f32>, std::time::Duration)> {
    let (rank, size, n) = (comm.rank(), comm.size(), plan.n);
    let stream = Stream::non_blocking(ctx)?;
    let k = kernels(ctx)?;
    let peers: Vec<usize> = [rank.checked_sub(1), Some(rank + 1).filter(|&p| p < size)]
        .into_iter()
        .flatten()
        .collect();
    let mut window = Window::<f32>::new(comm, &stream, 2 * n, &peers)?;
    let start: Vec<f32> = (0..n).map(|i| (1000 * rank + i) as f32).collect();
    let mut base = DeviceBuffer::from_slice(&stream, &start)?;
    let mut history = DeviceBuffer::<f32>::zeros(&stream, 2 * n * plan.iterations)?;
    let mut round = |s: &Stream| -> Result<()> {
        k.axpb
            .launch(s, config(n), (n as u32, 1.0f32, 1.0f32, &mut base))?;
        for it in 0..plan.iterations {
            // Store into each neighbour's halo once it has read the previous one.
            for &p in &peers {
                if !(plan.omit == Omit::WaitReadOnRank0 && rank == 0) {
                    window.wait_read(s, p)?;
                }
                // In `p`'s window, rank `rank` fills the upper halo when it is above `p`.
                let halo = if rank < p { 0..n } else { n..2 * n };
                let mut dst = window.peer_mut(p)?.slice_mut(halo)?;
                k.affine
                    .launch(s, config(n), (n as u32, 1.0f32, it as f32, &base, &mut dst))?;
                window.signal_written(s, p)?;
            }
            // Read both halos once both neighbours wrote them, then say so.
            for &p in &peers {
                if !(plan.omit == Omit::WaitWrittenOnRank1 && rank == 1) {
                    window.wait_written(s, p)?;
                }
            }
            let mut slot = history.slice_mut(2 * n * it..2 * n * (it + 1))?;
            k.affine.launch(
                s,
                config(2 * n),
                ((2 * n) as u32, 1.0f32, 0.0f32, window.local(), &mut slot),
            )?;
            for &p in &peers {
                window.signal_read(s, p)?;
            }
        }
        Ok(())
    };
    let elapsed = if plan.graph {
        let graph = stream.capture(CaptureMode::ThreadLocal, &mut round)?;
        let exec = graph.instantiate()?;
        exec.upload(&stream)?;
        stream.synchronize()?;
        let start = std::time::Instant::now();
        for _ in 0..plan.rounds {
            exec.launch(&stream)?;
        }
        stream.synchronize()?;
        start.elapsed()
    } else {
        let start = std::time::Instant::now();
        for _ in 0..plan.rounds {
            round(&stream)?;
        }
        stream.synchronize()?;
        start.elapsed()
    };
    Ok((history.to_vec(&stream)?, elapsed))
}

/// What rank `rank`'s history must hold after `plan` on `size` ranks; the first wrong
/// element as an error.
pub fn check_history(
    rank: usize,
    size: usize,
    plan: Plan,
    history: &[f32],
) -> std::result::Result<(), String> {
    let n = plan.n;
    for it in 0..plan.iterations {
        for half in 0..2 {
            // The upper halo comes from rank - 1, the lower one from rank + 1.
            let from = if half == 0 {
                rank.checked_sub(1)
            } else {
                Some(rank + 1).filter(|&p| p < size)
            };
            for i in 0..n {
                let want = match from {
                    Some(p) => (1000 * p + i + plan.rounds + it) as f32,
                    None => 0.0,
                };
                let got = history[2 * n * it + half * n + i];
                if got != want {
                    return Err(format!(
                        "rank {rank}, exchange {it}, {} halo element {i}: {got}, expected {want}",
                        if half == 0 { "upper" } else { "lower" }
                    ));
                }
            }
        }
    }
    Ok(())
}

gpu_pipeline! {
    /// One exchange of the chain inside a pipeline's step, through a `call` with signals
    /// written by hand (a chain's end ranks have one neighbour, which `on rank` arguments
    /// cannot say; [`RingStep`] has the macro derive them): the called function waits until the neighbours read what it
    /// stored last, stores this rank's `base` (plus `offset`) into their halos, signals them,
    /// waits for theirs and copies its own halos into `seen`, then tells them so. The macro
    /// orders the call by `base` and `seen`; the window's signals order the ranks.
    pub pipeline WindowStep {
        streams { main }
        params {
            exchange: &ChainExchange,
            window: &mut Window<f32>,
            offset: f32,
            base: &DeviceBuffer<f32>,
            seen: &mut DeviceBuffer<f32>,
        }
        stage swap_halos on main {
            call exchange_halos(exchange, window, offset, base, seen)
                reads(exchange, base) writes(window, seen);
        }
    }
}

/// What [`WindowStep`]'s `call` needs besides its buffers: the kernels and the neighbours.
pub struct ChainExchange {
    kernels: Kernels,
    rank: usize,
    peers: Vec<usize>,
    n: usize,
}

impl std::fmt::Debug for ChainExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainExchange")
            .field("rank", &self.rank)
            .field("peers", &self.peers)
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl ChainExchange {
    /// Rank `comm.rank()`'s exchange of `n`-element halos, with its kernels on `ctx`.
    pub fn new(ctx: &Context, comm: &Communicator, n: usize) -> Result<ChainExchange> {
        let (rank, size) = (comm.rank(), comm.size());
        let peers = [rank.checked_sub(1), Some(rank + 1).filter(|&p| p < size)]
            .into_iter()
            .flatten()
            .collect();
        Ok(ChainExchange {
            kernels: kernels(ctx)?,
            rank,
            peers,
            n,
        })
    }

    /// The neighbours.
    pub fn peers(&self) -> &[usize] {
        &self.peers
    }
}

/// `WindowStep`'s called function (see there).
fn exchange_halos(
    stream: &TypedStream<'_, WindowStepMain>,
    exchange: &ChainExchange,
    window: &mut Window<f32>,
    offset: f32,
    base: &DeviceBuffer<f32>,
    seen: &mut DeviceBuffer<f32>,
) -> Result<()> {
    let (n, rank) = (exchange.n, exchange.rank);
    let affine = &exchange.kernels.affine;
    for &p in &exchange.peers {
        window.wait_read(stream, p)?;
        let halo = if rank < p { 0..n } else { n..2 * n };
        let mut dst = window.peer_mut(p)?.slice_mut(halo)?;
        stream.launch(
            affine,
            config(n),
            (n as u32, 1.0f32, offset, base, &mut dst),
        )?;
        window.signal_written(stream, p)?;
    }
    for &p in &exchange.peers {
        window.wait_written(stream, p)?;
    }
    stream.launch(
        affine,
        config(2 * n),
        ((2 * n) as u32, 1.0f32, 0.0f32, window.local(), seen),
    )?;
    for &p in &exchange.peers {
        window.signal_read(stream, p)?;
    }
    Ok(())
}

/// One rank of the chain through [`WindowStep`]: `steps` replays of the captured step, replay
/// `k` storing `base + k` (`set_offset` before each), then one eager step storing
/// `base + steps`. Returns the halos seen after the replays and after the eager step.
pub fn pipeline_rank(
    ctx: &Context,
    comm: &Communicator,
    n: usize,
    steps: usize,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let stream = Stream::non_blocking(ctx)?;
    let exchange = ChainExchange::new(ctx, comm, n)?;
    let mut window = Window::<f32>::new(comm, &stream, 2 * n, exchange.peers())?;
    let rank = comm.rank();
    let start: Vec<f32> = (0..n).map(|i| (1000 * rank + i) as f32).collect();
    let base = DeviceBuffer::from_slice(&stream, &start)?;
    let mut seen = DeviceBuffer::<f32>::zeros(&stream, 2 * n)?;
    stream.synchronize()?;
    let mut pipeline = WindowStep::new(ctx)?;
    {
        let mut graph = pipeline.capture(WindowStepParams {
            exchange: &exchange,
            window: &mut window,
            offset: 0.0,
            base: &base,
            seen: &mut seen,
        })?;
        for step in 0..steps {
            graph.set_offset(step as f32)?;
            graph.launch()?;
        }
        graph.synchronize()?;
    }
    let replayed = seen.to_vec(&stream)?;
    let eager = WindowStepParams {
        exchange: &exchange,
        window: &mut window,
        offset: steps as f32,
        base: &base,
        seen: &mut seen,
    };
    pipeline.run(eager)?.wait()?;
    Ok((replayed, seen.to_vec(&stream)?))
}

/// The halos rank `rank` of `size` sees after a step that stored `base + offset`.
pub fn pipeline_halos(rank: usize, size: usize, n: usize, offset: usize) -> Vec<f32> {
    let from = |p: Option<usize>, i: usize| p.map_or(0.0, |p| (1000 * p + i + offset) as f32);
    let (up, down) = (rank.checked_sub(1), Some(rank + 1).filter(|&p| p < size));
    (0..n)
        .map(|i| from(up, i))
        .chain((0..n).map(|i| from(down, i)))
        .collect()
}

/// `up[i] = down[i] = a * src[i] + b`, as `affine2` computes it.
pub fn affine2_cpu(n: u32, a: f32, b: f32, src: &[f32], up: &mut [f32], down: &mut [f32]) {
    for i in 0..n as usize {
        up[i] = a * src[i] + b;
        down[i] = up[i];
    }
}

gpu_pipeline! {
    /// The exchange of a ring of ranks in the language: the macro derives the window's
    /// signals. `store` writes this rank's `base` (plus `offset`) into the lower halo of the
    /// rank above and the upper halo of the rank below (one rank on two ranks: two parts of
    /// its window), waiting until they read the last store and then telling them; `load`
    /// waits for both neighbours' stores into this rank's `halos`, copies them into `seen`,
    /// and tells the neighbours it read them.
    pub pipeline RingStep {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n])
                cpu = crate::onesided::affine_cpu;
            fn affine2(n: u32, a: f32, b: f32, src: &[f32; n], up: &mut [f32; n],
                       down: &mut [f32; n])
                cpu = crate::onesided::affine2_cpu;
        }
        params {
            n: u32,
            up: usize,
            down: usize,
            offset: f32,
            halos: &mut Window<f32>,
            base: &DeviceBuffer<f32>,
            seen: &mut DeviceBuffer<f32>,
        }
        stage store on main {
            launch k::affine2(n, 1.0, offset, base,
                              halos[n..2 * n] on rank up, halos[..n] on rank down)
                grid n.div_ceil(256) block 256;
        }
        stage load on main {
            launch k::affine(2 * n, 1.0, 0.0, halos, seen) grid (2 * n).div_ceil(256) block 256;
        }
    }
}

/// One rank of a ring through [`RingStep`]: `steps` replays of the captured step, replay
/// `k` storing `base + k`, then one eager step storing `base + steps`. Returns the halos seen
/// after the replays and after the eager step. With `alternate`, the replays are launches of
/// the lent instantiation on two streams of the rank's own in turn.
pub fn ring_rank(
    ctx: &Context,
    comm: &Communicator,
    n: usize,
    steps: usize,
    alternate: bool,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let stream = Stream::non_blocking(ctx)?;
    let (rank, size) = (comm.rank(), comm.size());
    let (up, down) = ring_neighbours(rank, size);
    let peers = if up == down { vec![up] } else { vec![up, down] };
    let mut halos = Window::<f32>::new(comm, &stream, 2 * n, &peers)?;
    let start: Vec<f32> = (0..n).map(|i| (1000 * rank + i) as f32).collect();
    let base = DeviceBuffer::from_slice(&stream, &start)?;
    let mut seen = DeviceBuffer::<f32>::zeros(&stream, 2 * n)?;
    stream.synchronize()?;
    let mut pipeline = RingStep::new(ctx)?;
    {
        let mut graph = pipeline.capture(RingStepParams {
            n: n as u32,
            up,
            down,
            offset: 0.0,
            halos: &mut halos,
            base: &base,
            seen: &mut seen,
        })?;
        let lanes = [Stream::non_blocking(ctx)?, Stream::non_blocking(ctx)?];
        for step in 0..steps {
            graph.set_offset(step as f32)?;
            if alternate {
                let exec = graph
                    .exec()
                    .expect("a captured step lends its instantiation");
                exec.launch(&lanes[step % 2])?;
            } else {
                graph.launch()?;
            }
        }
        graph.synchronize()?;
    }
    let replayed = seen.to_vec(&stream)?;
    pipeline
        .run(RingStepParams {
            n: n as u32,
            up,
            down,
            offset: steps as f32,
            halos: &mut halos,
            base: &base,
            seen: &mut seen,
        })?
        .wait()?;
    Ok((replayed, seen.to_vec(&stream)?))
}

/// The ranks above and below `rank` in a ring of `size`.
pub fn ring_neighbours(rank: usize, size: usize) -> (usize, usize) {
    ((rank + size - 1) % size, (rank + 1) % size)
}

/// The halos rank `rank` of a ring of `size` sees after a [`RingStep`] that stored
/// `base + offset`: the rank above's, then the rank below's.
pub fn ring_halos(rank: usize, size: usize, n: usize, offset: usize) -> Vec<f32> {
    let (up, down) = ring_neighbours(rank, size);
    let from = |p: usize, i: usize| (1000 * p + i + offset) as f32;
    (0..n)
        .map(|i| from(up, i))
        .chain((0..n).map(|i| from(down, i)))
        .collect()
}

gpu_pipeline! {
    /// [`RingStep`] the other way round: `load` reads what the neighbours stored in the step
    /// before (before the first step: what each rank set in its own window, counted as their
    /// stores with `Window::mark_written`), then `store` writes the neighbours' halos for the
    /// next step, as a Jacobi sweep that stores its edge rows into the next sweep's halos does.
    pub pipeline RingReadFirst {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n])
                cpu = crate::onesided::affine_cpu;
            fn affine2(n: u32, a: f32, b: f32, src: &[f32; n], up: &mut [f32; n],
                       down: &mut [f32; n])
                cpu = crate::onesided::affine2_cpu;
        }
        params {
            n: u32,
            up: usize,
            down: usize,
            offset: f32,
            halos: &mut Window<f32>,
            base: &DeviceBuffer<f32>,
            seen: &mut DeviceBuffer<f32>,
        }
        stage load on main {
            launch k::affine(2 * n, 1.0, 0.0, halos, seen) grid (2 * n).div_ceil(256) block 256;
        }
        stage store on main {
            launch k::affine2(n, 1.0, offset, base,
                              halos[n..2 * n] on rank up, halos[..n] on rank down)
                grid n.div_ceil(256) block 256;
        }
    }
}

/// One rank of a ring through [`RingReadFirst`], its window set to `-1` and (with `mark`)
/// marked written first: `steps` replays of the captured step, replay `k` storing
/// `base + k`, then one eager step storing `base + steps`. Returns the halos seen in the
/// first replay, in the last replay and in the eager step.
pub fn ring_read_first_rank(
    ctx: &Context,
    comm: &Communicator,
    n: usize,
    steps: usize,
    mark: bool,
) -> Result<[Vec<f32>; 3]> {
    let stream = Stream::non_blocking(ctx)?;
    let (rank, size) = (comm.rank(), comm.size());
    let (up, down) = ring_neighbours(rank, size);
    let peers = if up == down { vec![up] } else { vec![up, down] };
    let mut halos = Window::<f32>::new(comm, &stream, 2 * n, &peers)?;
    stream.memset_u32(halos.local_mut(), (-1.0f32).to_bits())?;
    if mark {
        halos.mark_written(&stream)?;
    }
    let start: Vec<f32> = (0..n).map(|i| (1000 * rank + i) as f32).collect();
    let base = DeviceBuffer::from_slice(&stream, &start)?;
    let mut seen = DeviceBuffer::<f32>::zeros(&stream, 2 * n)?;
    stream.synchronize()?;
    let mut pipeline = RingReadFirst::new(ctx)?;
    let mut first = Vec::new();
    {
        let mut graph = pipeline.capture(RingReadFirstParams {
            n: n as u32,
            up,
            down,
            offset: 0.0,
            halos: &mut halos,
            base: &base,
            seen: &mut seen,
        })?;
        for step in 0..steps {
            graph.set_offset(step as f32)?;
            graph.launch()?;
            if step == 0 {
                graph.synchronize()?;
                first = graph.params().seen.to_vec(&stream)?;
            }
        }
        graph.synchronize()?;
    }
    let replayed = seen.to_vec(&stream)?;
    pipeline
        .run(RingReadFirstParams {
            n: n as u32,
            up,
            down,
            offset: steps as f32,
            halos: &mut halos,
            base: &base,
            seen: &mut seen,
        })?
        .wait()?;
    Ok([first, replayed, seen.to_vec(&stream)?])
}

/// One eager [`RingStep`] on a ring window of `comm`'s rank, storing into `up` and `down` as
/// given (which may not be the window's peers); the step's error, if it is refused.
pub fn ring_step_with(
    ctx: &Context,
    comm: &Communicator,
    n: usize,
    (up, down): (usize, usize),
) -> Result<()> {
    let stream = Stream::non_blocking(ctx)?;
    let (rank, size) = (comm.rank(), comm.size());
    let (above, below) = ring_neighbours(rank, size);
    let peers = if above == below {
        vec![above]
    } else {
        vec![above, below]
    };
    let mut halos = Window::<f32>::new(comm, &stream, 2 * n, &peers)?;
    let base = DeviceBuffer::<f32>::zeros(&stream, n)?;
    let mut seen = DeviceBuffer::<f32>::zeros(&stream, 2 * n)?;
    stream.synchronize()?;
    let mut pipeline = RingStep::new(ctx)?;
    pipeline
        .run(RingStepParams {
            n: n as u32,
            up,
            down,
            offset: 0.0,
            halos: &mut halos,
            base: &base,
            seen: &mut seen,
        })?
        .wait()
}

gpu_pipeline! {
    /// [`RingStep`] with the parts it writes at params: `halos[up_at..] on rank up` and
    /// `halos[down_at..] on rank down`, `n` elements each. The compiler cannot tell whether
    /// they are apart; the step checks them before it enqueues anything.
    pub pipeline RingStepAt {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n])
                cpu = crate::onesided::affine_cpu;
            fn affine2(n: u32, a: f32, b: f32, src: &[f32; n], up: &mut [f32; n],
                       down: &mut [f32; n])
                cpu = crate::onesided::affine2_cpu;
        }
        params {
            n: u32,
            up: usize,
            down: usize,
            up_at: usize,
            down_at: usize,
            halos: &mut Window<f32>,
            base: &DeviceBuffer<f32>,
            seen: &mut DeviceBuffer<f32>,
        }
        stage store on main {
            launch k::affine2(n, 1.0, 0.0, base,
                              halos[up_at..up_at + n as usize] on rank up,
                              halos[down_at..down_at + n as usize] on rank down)
                grid n.div_ceil(256) block 256;
        }
        stage load on main {
            launch k::affine(2 * n, 1.0, 0.0, halos, seen) grid (2 * n).div_ceil(256) block 256;
        }
    }
}

/// One [`RingStepAt`] on a ring of `comm`'s ranks, the part for the rank above at `up_at` and
/// the one for the rank below at `down_at`, run eagerly or (`captured`) captured and
/// replayed once: the halos this rank then sees.
pub fn ring_step_at(
    ctx: &Context,
    comm: &Communicator,
    n: usize,
    (up_at, down_at): (usize, usize),
    captured: bool,
) -> Result<Vec<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    let (rank, size) = (comm.rank(), comm.size());
    let (up, down) = ring_neighbours(rank, size);
    let peers = if up == down { vec![up] } else { vec![up, down] };
    let mut halos = Window::<f32>::new(comm, &stream, 2 * n, &peers)?;
    let start: Vec<f32> = (0..n).map(|i| (1000 * rank + i) as f32).collect();
    let base = DeviceBuffer::from_slice(&stream, &start)?;
    let mut seen = DeviceBuffer::<f32>::zeros(&stream, 2 * n)?;
    stream.synchronize()?;
    let mut pipeline = RingStepAt::new(ctx)?;
    let params = RingStepAtParams {
        n: n as u32,
        up,
        down,
        up_at,
        down_at,
        halos: &mut halos,
        base: &base,
        seen: &mut seen,
    };
    if captured {
        let mut graph = pipeline.capture(params)?;
        graph.launch()?;
        graph.synchronize()?;
    } else {
        pipeline.run(params)?.wait()?;
    }
    seen.to_vec(&stream)
}
