//! A captured step updated from a new capture (`recapture`, `recapture_with`: updated in
//! place when the topology allows, instantiated anew when not, and which one is said), and
//! cloned into a second executable graph (`clone_step`). Each scenario runs on the checked
//! CPU backend (results compared with a CPU reference, zero races) and, ignored here, on CUDA.

use gpu_pipeline::{
    Context, DeviceBuffer, GraphUpdateResult, PinnedBuffer, Recaptured, Result, Stream,
    gpu_pipeline,
};

/// The CPU implementations of `tests/kernels/language.cu`, the same arithmetic.
mod cpu {
    pub fn affine(n: u32, a: f32, b: f32, src: &[f32], dst: &mut [f32]) {
        for i in 0..n as usize {
            dst[i] = a * src[i] + b;
        }
    }

    pub fn axpb(n: u32, a: f32, b: f32, x: &mut [f32]) {
        for v in &mut x[..n as usize] {
            *v = a * *v + b;
        }
    }

    pub fn sum_serial(n: u32, x: &[f32], out: &mut [f32]) {
        out[0] = x[..n as usize].iter().fold(0.0, |s, &v| s + v);
    }

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

tests::on_both_backends_race_free!(
    recapturing_every_sweep_updates_the_graph_in_place,
    recapture_takes_whole_new_params_and_frees_the_old_ones_at_drop,
    a_buffer_taken_out_by_recapture_with_is_the_hosts_at_once,
    a_changed_topology_is_instantiated_anew_and_says_why,
    a_refused_recapture_builds_again_at_the_next_launch,
    a_recapture_outdates_the_other_arrangement_until_it_is_swapped_to,
    a_cloned_step_replays_with_its_own_scalars,
    a_forgotten_clone_is_waited_for_when_the_original_drops,
    launches_of_a_lent_instantiation_on_another_stream_are_waited_for,
    a_lent_instantiation_has_the_setters_applied,
    a_clone_of_a_recaptured_step_runs_the_new_params,
    a_step_with_a_device_loop_is_recaptured_and_cloned,
    launches_of_a_lent_instantiation_on_two_streams_run_one_after_the_other,
    a_clone_that_resizes_scratch_leaves_the_original_consistent,
    a_launch_after_a_synchronize_is_waited_for_again,
    a_clones_recapture_waits_for_the_originals_launches,
);

/// Uploads `data` and waits, so the pipeline's streams find it there.
fn upload(ctx: &Context, data: &[f32]) -> Result<DeviceBuffer<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    let buffer = DeviceBuffer::from_slice(&stream, data)?;
    stream.synchronize()?;
    Ok(buffer)
}

/// Reads a device buffer back.
fn read(ctx: &Context, buffer: &DeviceBuffer<f32>) -> Result<Vec<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    buffer.to_vec(&stream)
}

gpu_pipeline! {
    /// One sweep `next = a * field + b` and its sum read back: jacobiCudaGraphs' method 1
    /// re-captures this with `field` and `next` exchanged every sweep.
    pub pipeline Sweep {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::affine;
            fn sum_serial(n: u32, x: &[f32; n], out: &mut [f32; 1]) cpu = cpu::sum_serial;
        }
        params {
            n: u32,
            a: f32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            total: &mut DeviceBuffer<f32>,
            total_host: &mut PinnedBuffer<f32>,
        }
        stage sweep on main {
            fill total = 0.0;
            launch k::affine(n, a, 1.0, field, next) grid n.div_ceil(128) block 128;
            launch k::sum_serial(n, next, total) grid 1u32 block 1u32;
        }
        stage report on copy { copy total -> total_host; }
    }
}

fn sweep(a: f32, field: &[f32]) -> Vec<f32> {
    field.iter().map(|v| a * v + 1.0).collect()
}

fn sum(values: &[f32]) -> f32 {
    values.iter().fold(0.0, |s, &v| s + v)
}

fn recapturing_every_sweep_updates_the_graph_in_place(ctx: &Context) -> Result<()> {
    const N: usize = 300;
    let init: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let mut field = upload(ctx, &init)?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut total = upload(ctx, &[0.0])?;
    let mut total_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut pipeline = Sweep::new(ctx)?;
    let mut graph = pipeline.capture(SweepParams {
        n: N as u32,
        a: 0.5,
        field: &mut field,
        next: &mut next,
        total: &mut total,
        total_host: &mut total_host,
    })?;
    let mut want = init.clone();
    for k in 0..9 {
        if k > 0 {
            // The grids exchanged and the step re-recorded: same topology, new buffers.
            let outcome = graph.recapture_with(|p| std::mem::swap(&mut p.field, &mut p.next))?;
            assert_eq!(outcome, Recaptured::Updated, "sweep {k}");
        }
        graph.launch()?;
        want = sweep(0.5, &want);
        assert_eq!(graph.window()?.total_host()?[0], sum(&want), "sweep {k}");
    }
    graph.synchronize()?;
    // Nine sweeps, the last into what was passed as `next` (the arrangement of even sweeps).
    drop(graph);
    assert_eq!(read(ctx, &next)?, want);
    Ok(())
}

fn recapture_takes_whole_new_params_and_frees_the_old_ones_at_drop(ctx: &Context) -> Result<()> {
    const N: usize = 64;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut total = upload(ctx, &[0.0])?;
    let mut total_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut other_field = upload(ctx, &[2.0; N])?;
    let mut other_next = upload(ctx, &[0.0; N])?;
    let mut other_total = upload(ctx, &[0.0])?;
    let mut other_total_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut pipeline = Sweep::new(ctx)?;
    let mut graph = pipeline.capture(SweepParams {
        n: N as u32,
        a: 3.0,
        field: &mut field,
        next: &mut next,
        total: &mut total,
        total_host: &mut total_host,
    })?;
    graph.launch()?;
    // Not waited for: the launch in flight keeps the parameters it was launched with.
    let outcome = graph.recapture(SweepParams {
        n: N as u32,
        a: 0.25,
        field: &mut other_field,
        next: &mut other_next,
        total: &mut other_total,
        total_host: &mut other_total_host,
    })?;
    assert_eq!(outcome, Recaptured::Updated);
    graph.launch()?;
    assert_eq!(graph.window()?.total_host()?[0], 1.5 * N as f32);
    assert_eq!(graph.params().a, 0.25);
    drop(graph);
    assert_eq!(read(ctx, &next)?, vec![4.0; N]);
    assert_eq!(total_host.to_vec()?, vec![4.0 * N as f32]);
    assert_eq!(read(ctx, &other_next)?, vec![1.5; N]);
    Ok(())
}

fn a_buffer_taken_out_by_recapture_with_is_the_hosts_at_once(ctx: &Context) -> Result<()> {
    const N: usize = 32;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut total = upload(ctx, &[0.0])?;
    let mut total_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut pipeline = Sweep::new(ctx)?;
    let spare = &mut spare;
    let mut graph = pipeline.capture(SweepParams {
        n: N as u32,
        a: 2.0,
        field: &mut field,
        next: &mut next,
        total: &mut total,
        total_host: &mut total_host,
    })?;
    graph.launch()?;
    // `next` leaves the graph, `spare` takes its place: the launch in flight is waited for
    // first, and nothing built with `next` runs again.
    let mut taken = None;
    let outcome = graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.next, spare)))?;
    assert_eq!(outcome, Recaptured::Updated);
    let taken: &mut DeviceBuffer<f32> = taken.expect("the closure ran");
    let stream = Stream::non_blocking(ctx)?;
    assert_eq!(taken.to_vec(&stream)?, vec![3.0; N]);
    graph.set_a(4.0)?;
    graph.launch()?;
    graph.launch()?;
    // The host owns `next` while the graph replays into `spare`.
    stream.memset_u32(taken, 9.0f32.to_bits())?;
    assert_eq!(graph.window()?.total_host()?[0], 5.0 * N as f32);
    stream.synchronize()?;
    assert_eq!(taken.to_vec(&stream)?, vec![9.0; N]);
    drop(graph);
    assert_eq!(read(ctx, spare)?, vec![5.0; N]);
    Ok(())
}

gpu_pipeline! {
    /// `x = a * x + b` over `chunks` chunks, one stage each: the number of nodes follows
    /// `chunks`.
    pub pipeline Chunked {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; n]) cpu = cpu::axpb;
        }
        params {
            chunks: usize,
            chunk: usize,
            a: f32,
            x: &mut DeviceBuffer<f32>,
        }
        for i in 0..chunks {
            stage scale on main {
                launch k::axpb(chunk as u32, a, 1.0, x[i * chunk..(i + 1) * chunk])
                    grid (chunk as u32).div_ceil(64) block 64;
            }
        }
    }
}

fn a_changed_topology_is_instantiated_anew_and_says_why(ctx: &Context) -> Result<()> {
    const CHUNK: usize = 16;
    let mut x = upload(ctx, &[0.0; 4 * CHUNK])?;
    let mut pipeline = Chunked::new(ctx)?;
    let mut graph = pipeline.capture(ChunkedParams {
        chunks: 2,
        chunk: CHUNK,
        a: 1.0,
        x: &mut x,
    })?;
    graph.launch()?; // the first two chunks: 1
    let nodes = graph.node_count()?;
    // Four chunks: more nodes, so the driver refuses the update.
    let outcome = graph.recapture_with(|p| p.chunks = 4)?;
    assert_eq!(
        outcome,
        Recaptured::Instantiated {
            refused: Some(GraphUpdateResult::ERROR_TOPOLOGY_CHANGED)
        }
    );
    assert_eq!(graph.node_count()?, 2 * nodes);
    graph.launch()?; // 2 in the first two chunks, 1 in the others
    // The same topology again, another scale: updated in place.
    assert_eq!(graph.recapture_with(|p| p.a = 2.0)?, Recaptured::Updated);
    graph.launch()?; // 5, then 3
    drop(graph);
    let mut want = vec![5.0; 2 * CHUNK];
    want.extend([3.0; 2 * CHUNK]);
    assert_eq!(read(ctx, &x)?, want);
    Ok(())
}

fn a_refused_recapture_builds_again_at_the_next_launch(ctx: &Context) -> Result<()> {
    const CHUNK: usize = 16;
    let mut x = upload(ctx, &[0.0; 2 * CHUNK])?;
    let mut pipeline = Chunked::new(ctx)?;
    let mut graph = pipeline.capture(ChunkedParams {
        chunks: 2,
        chunk: CHUNK,
        a: 1.0,
        x: &mut x,
    })?;
    graph.launch()?; // 1
    // Three chunks do not fit in `x`: refused, and no instantiation of the old params runs.
    let refused = graph.recapture_with(|p| p.chunks = 3).unwrap_err();
    assert!(
        refused.to_string().contains("uses elements 32..48 of `x`"),
        "{refused}"
    );
    assert!(graph.exec().is_none());
    let again = graph.launch().unwrap_err();
    assert_eq!(again.to_string(), refused.to_string());
    // Fixed: the outdated executable graph takes the new build in place.
    assert_eq!(graph.recapture_with(|p| p.chunks = 2)?, Recaptured::Updated);
    graph.launch()?; // 2
    drop(graph);
    assert_eq!(read(ctx, &x)?, vec![2.0; 2 * CHUNK]);
    Ok(())
}

gpu_pipeline! {
    /// `next = a * field + 1`, the grids swapped between replays.
    pub pipeline PingPong {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::affine;
        }
        params {
            n: u32,
            a: f32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
        }
        swap(field, next);
        stage step on main {
            launch k::affine(n, a, 1.0, field, next) grid n.div_ceil(64) block 64;
        }
    }
}

fn a_recapture_outdates_the_other_arrangement_until_it_is_swapped_to(ctx: &Context) -> Result<()> {
    const N: usize = 40;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut pipeline = PingPong::new(ctx)?;
    let mut graph = pipeline.capture(PingPongParams {
        n: N as u32,
        a: 2.0,
        field: &mut field,
        next: &mut next,
    })?;
    graph.launch()?; // next = 3
    graph.swap_field_next()?; // both arrangements built
    graph.launch()?; // field = 7
    assert_eq!(graph.recapture_with(|p| p.a = 0.5)?, Recaptured::Updated);
    graph.launch()?; // field = 0.5 * next + 1 = 2.5
    graph.swap_field_next()?; // the first arrangement, updated from a new build
    graph.launch()?; // next = 0.5 * 2.5 + 1 = 2.25
    drop(graph);
    assert_eq!(read(ctx, &field)?, vec![2.5; N]);
    assert_eq!(read(ctx, &next)?, vec![2.25; N]);
    Ok(())
}

fn a_cloned_step_replays_with_its_own_scalars(ctx: &Context) -> Result<()> {
    const N: usize = 48;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut pipeline = PingPong::new(ctx)?;
    let mut graph = pipeline.capture(PingPongParams {
        n: N as u32,
        a: 2.0,
        field: &mut field,
        next: &mut next,
    })?;
    graph.set_a(3.0)?; // not applied yet: the clone takes it too
    {
        let mut clone = graph.clone_step()?;
        assert_eq!(clone.node_count()?, 1);
        clone.launch()?; // next = 4
        clone.set_a(10.0)?;
        clone.swap_field_next()?;
        clone.launch()?; // field = 41
        clone.synchronize()?;
    }
    // The original keeps its arrangement and `a`.
    assert_eq!(graph.params().a, 3.0);
    graph.launch()?; // next = 3 * 41 + 1 = 124
    drop(graph);
    assert_eq!(read(ctx, &field)?, vec![41.0; N]);
    assert_eq!(read(ctx, &next)?, vec![124.0; N]);
    Ok(())
}

/// A clone borrows the params through the original, so the original's drop is where their
/// borrow ends: it waits for the clone's replays even when the clone was never dropped.
fn a_forgotten_clone_is_waited_for_when_the_original_drops(ctx: &Context) -> Result<()> {
    const N: usize = 64;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut pipeline = PingPong::new(ctx)?;
    let mut graph = pipeline.capture(PingPongParams {
        n: N as u32,
        a: 2.0,
        field: &mut field,
        next: &mut next,
    })?;
    let mut clone = graph.clone_step()?;
    clone.launch()?; // next = 3
    std::mem::forget(clone);
    drop(graph); // the original never launched, yet it waits
    // Read on other streams at once: a replay still in flight would race with them.
    assert_eq!(read(ctx, &next)?, vec![3.0; N]);
    assert_eq!(read(ctx, &field)?, vec![1.0; N]);
    Ok(())
}

/// `exec()` applies the in-place setters called since the last launch before it lends the
/// instantiation, as a launch would (it launched `a = 2` after `set_a(5.0)` before).
fn a_lent_instantiation_has_the_setters_applied(ctx: &Context) -> Result<()> {
    const N: usize = 16;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let foreign = Stream::non_blocking(ctx)?;
    let mut pipeline = PingPong::new(ctx)?;
    let mut graph = pipeline.capture(PingPongParams {
        n: N as u32,
        a: 2.0,
        field: &mut field,
        next: &mut next,
    })?;
    graph.set_a(5.0)?;
    graph.exec().expect("updated").launch(&foreign)?; // next = 5 * 1 + 1
    foreign.synchronize()?;
    drop(graph);
    assert_eq!(read(ctx, &next)?, vec![6.0; N]);
    Ok(())
}

/// `exec()` lends the instantiation, which may be launched on any stream: the graph's waits
/// that hand buffers back (a `recapture_with`, its drop) wait for those launches too.
fn launches_of_a_lent_instantiation_on_another_stream_are_waited_for(ctx: &Context) -> Result<()> {
    const N: usize = 32;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut spare = upload(ctx, &[5.0; N])?;
    let foreign = Stream::non_blocking(ctx)?;
    let mut pipeline = PingPong::new(ctx)?;
    let mut graph = pipeline.capture(PingPongParams {
        n: N as u32,
        a: 2.0,
        field: &mut field,
        next: &mut next,
    })?;
    let exec = graph.exec().expect("captured");
    exec.launch(&foreign)?; // next = 3
    // `next` taken out: it is the host's once this returns.
    let mut taken = None;
    let outcome =
        graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.next, &mut spare)))?;
    assert_eq!(outcome, Recaptured::Updated);
    let taken = taken.expect("edited");
    assert_eq!(read(ctx, taken)?, vec![3.0; N]);
    let exec = graph.exec().expect("captured");
    exec.launch(&foreign)?; // spare = 3
    drop(graph); // never launched itself, yet it waits
    assert_eq!(read(ctx, &spare)?, vec![3.0; N]);
    Ok(())
}

fn a_clone_of_a_recaptured_step_runs_the_new_params(ctx: &Context) -> Result<()> {
    const N: usize = 100;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut total = upload(ctx, &[0.0])?;
    let mut total_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut pipeline = Sweep::new(ctx)?;
    let mut graph = pipeline.capture(SweepParams {
        n: N as u32,
        a: 2.0,
        field: &mut field,
        next: &mut next,
        total: &mut total,
        total_host: &mut total_host,
    })?;
    graph.launch()?; // next = 3
    assert_eq!(
        graph.recapture_with(|p| std::mem::swap(&mut p.field, &mut p.next))?,
        Recaptured::Updated
    );
    let mut clone = graph.clone_step()?;
    clone.launch()?; // field = 7: the clone has the exchanged grids
    assert_eq!(clone.window()?.total_host()?[0], 7.0 * N as f32);
    drop(clone);
    graph.launch()?; // field = 2 * 3 + 1 again
    assert_eq!(graph.window()?.total_host()?[0], 7.0 * N as f32);
    drop(graph);
    assert_eq!(read(ctx, &field)?, vec![7.0; N]);
    Ok(())
}

gpu_pipeline! {
    /// Lowers `residual` by one per iteration while it is above `tol`, counting iterations.
    pub pipeline Countdown {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            tol: f32,
            residual: &mut DeviceBuffer<f32>,
            iterations: &mut DeviceBuffer<f32>,
        }
        stage solve on main {
            while residual > tol max 100 {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
                launch k::add_scalar(1u32, 1.0f32, iterations) grid 1u32 block 1u32;
            }
        }
    }
}

fn a_step_with_a_device_loop_is_recaptured_and_cloned(ctx: &Context) -> Result<()> {
    let mut residual = upload(ctx, &[5.0])?;
    let mut other = upload(ctx, &[3.0])?;
    let mut iterations = upload(ctx, &[0.0])?;
    let mut pipeline = Countdown::new(ctx)?;
    let other = &mut other;
    let mut graph = pipeline.capture(CountdownParams {
        tol: 0.0,
        residual: &mut residual,
        iterations: &mut iterations,
    })?;
    graph.launch()?; // 5 iterations
    // Another residual: updated in place where the driver updates conditional nodes, built
    // again where it does not; either way the loop runs on the new buffer.
    let _outcome = graph.recapture_with(|p| p.residual = other)?;
    graph.launch()?; // 3 more
    {
        // A graph with a device loop cannot be cloned: the clone is built again.
        let mut clone = graph.clone_step()?;
        clone.set_tol(-2.0)?;
        clone.launch()?; // 0 -> -2: 2 more
        clone.synchronize()?;
    }
    graph.launch()?; // -2 is not above 0: none
    graph.synchronize()?;
    drop(graph);
    assert_eq!(read(ctx, &iterations)?, vec![10.0]);
    assert_eq!(read(ctx, &residual)?, vec![0.0]);
    assert_eq!(read(ctx, other)?, vec![-2.0]);
    Ok(())
}

gpu_pipeline! {
    /// Counts three iterations into `total` per step: each step refills `residual`.
    pub pipeline Refill {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params { residual: &mut DeviceBuffer<f32>, total: &mut DeviceBuffer<f32> }
        stage solve on main {
            fill residual = 3.0f32;
            while residual > 0.5f32 max 10 {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
                launch k::add_scalar(1u32, 1.0f32, total) grid 1u32 block 1u32;
            }
        }
    }
}

/// A lent instantiation launched on two streams in turn: as CUDA orders each launch of an
/// executable graph behind its earlier launches, the eight steps run one after the other
/// (the checked backend ran them at once: races on `residual`, counts mixed up).
fn launches_of_a_lent_instantiation_on_two_streams_run_one_after_the_other(
    ctx: &Context,
) -> Result<()> {
    let mut residual = upload(ctx, &[0.0])?;
    let mut total = upload(ctx, &[0.0])?;
    let (first, second) = (Stream::non_blocking(ctx)?, Stream::non_blocking(ctx)?);
    let mut pipeline = Refill::new(ctx)?;
    let mut graph = pipeline.capture(RefillParams {
        residual: &mut residual,
        total: &mut total,
    })?;
    let exec = graph.exec().expect("captured");
    for _ in 0..4 {
        exec.launch(&first)?;
        exec.launch(&second)?;
    }
    drop(graph); // waits for the lent launches
    assert_eq!(read(ctx, &total)?, vec![24.0]);
    Ok(())
}

gpu_pipeline! {
    /// `x = a * tmp` with `tmp` a scratch buffer of `m` elements filled with 5 each step: a
    /// setter of `m` builds the step again with a new `tmp`.
    pub pipeline Scaled {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::affine;
        }
        params { n: u32, a: f32, m: u32, x: &mut DeviceBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = m as usize }
        stage scale on main {
            fill tmp = 5.0;
            launch k::affine(n, a, 0.0, tmp, x) grid 1u32 block 32u32;
        }
    }
}

/// A clone shares the pipeline's scratch buffers; one whose setter resizes them (a new
/// allocation) leaves the original's nodes on the old ones. The original's next in-place
/// setter must not point one node at the new buffer while its `fill` writes the old one (a
/// wrong result growing, a kernel past a 2-element buffer shrinking): it builds again.
fn a_clone_that_resizes_scratch_leaves_the_original_consistent(ctx: &Context) -> Result<()> {
    for (clone_n, clone_m) in [(4, 8), (2, 2)] {
        let mut x = upload(ctx, &[0.0; 4])?;
        let mut pipeline = Scaled::new(ctx)?;
        let mut graph = pipeline.capture(ScaledParams {
            n: 4,
            a: 1.0,
            m: 4,
            x: &mut x,
        })?;
        graph.launch()?;
        graph.synchronize()?;
        {
            let mut clone = graph.clone_step()?;
            clone.set_n(clone_n)?; // in place, the clone only
            clone.set_m(clone_m)?; // builds the clone again, with a new `tmp`
            clone.launch()?;
            clone.synchronize()?;
        }
        graph.set_a(2.0)?; // in place, unless the original must build again
        graph.launch()?;
        graph.synchronize()?;
        assert_eq!(graph.params().m, 4);
        drop(graph);
        assert_eq!(
            read(ctx, &x)?,
            vec![10.0; 4],
            "clone n = {clone_n}, m = {clone_m}"
        );
    }
    Ok(())
}

/// A graph waits for its launches before a recapture and at its drop only when some may still
/// run: right after a `synchronize` (or a window) it waits for nothing, and a launch after that
/// is waited for again, by a recapture as by the drop (the checked backend sees a race if not).
fn a_launch_after_a_synchronize_is_waited_for_again(ctx: &Context) -> Result<()> {
    const N: usize = 4096;
    let init: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    let mut field = upload(ctx, &init)?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut total = upload(ctx, &[0.0])?;
    let mut total_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut pipeline = Sweep::new(ctx)?;
    let mut graph = pipeline.capture(SweepParams {
        n: N as u32,
        a: 0.5,
        field: &mut field,
        next: &mut next,
        total: &mut total,
        total_host: &mut total_host,
    })?;
    let mut want = init.clone();
    graph.launch()?;
    want = sweep(0.5, &want);
    graph.synchronize()?;
    // Nothing in flight: the recapture waits for nothing, and the exchange is the host's.
    let outcome = graph.recapture_with(|p| std::mem::swap(&mut p.field, &mut p.next))?;
    assert_eq!(outcome, Recaptured::Updated);
    graph.launch()?;
    want = sweep(0.5, &want);
    // In flight again: this recapture waits for that launch before the exchange.
    let outcome = graph.recapture_with(|p| std::mem::swap(&mut p.field, &mut p.next))?;
    assert_eq!(outcome, Recaptured::Updated);
    graph.launch()?;
    want = sweep(0.5, &want);
    // And the drop waits for the last launch, which wrote `next`.
    drop(graph);
    assert_eq!(read(ctx, &next)?, want);
    assert_eq!(total_host.to_vec()?[0], sum(&want));
    Ok(())
}

/// A clone replays on the original's pipeline and params: the original's launches still in
/// flight when it is cloned use the buffers a clone's `recapture_with` hands out, so that
/// recapture waits for them (the clone itself launched nothing yet).
fn a_clones_recapture_waits_for_the_originals_launches(ctx: &Context) -> Result<()> {
    const N: usize = 4096;
    let mut field = upload(ctx, &[1.0; N])?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut other = upload(ctx, &[0.0; N])?;
    let mut pipeline = PingPong::new(ctx)?;
    let mut graph = pipeline.capture(PingPongParams {
        n: N as u32,
        a: 2.0,
        field: &mut field,
        next: &mut next,
    })?;
    graph.launch()?; // next = 3, in flight
    {
        let mut clone = graph.clone_step()?;
        let mut taken = None;
        let outcome =
            clone.recapture_with(|p| taken = Some(std::mem::replace(&mut p.next, &mut other)))?;
        assert_eq!(outcome, Recaptured::Updated);
        let taken = taken.expect("the closure ran");
        // The host's at once: read on another stream, which the original's replay would race.
        assert_eq!(read(ctx, taken)?, vec![3.0; N]);
    }
    drop(graph);
    assert_eq!(read(ctx, &next)?, vec![3.0; N]);
    Ok(())
}
