//! The language beyond one straight-line step, end to end: new input each replay through a
//! window, buffer swaps, loops over chunks on stream arrays, ranges of one buffer, several
//! kinds of step, steps that run ahead, and host closures that see data and use non-`Copy`
//! params. Each scenario runs on the checked CPU backend (results compared with a CPU
//! reference, zero races) and, ignored here, on CUDA.

use std::sync::{Arc, Mutex};

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, Stream, gpu_pipeline};

/// The CPU implementations of `tests/kernels/language.cu`, the same arithmetic.
mod cpu {
    pub fn axpb(n: u32, a: f32, b: f32, x: &mut [f32]) {
        for v in &mut x[..n as usize] {
            *v = a * *v + b;
        }
    }

    pub fn affine(n: u32, a: f32, b: f32, src: &[f32], dst: &mut [f32]) {
        for i in 0..n as usize {
            dst[i] = a * src[i] + b;
        }
    }

    pub fn iota(n: u32, offset: f32, x: &mut [f32]) {
        for (i, v) in x[..n as usize].iter_mut().enumerate() {
            *v = offset + i as f32;
        }
    }

    pub fn sum_serial(n: u32, x: &[f32], out: &mut [f32]) {
        out[0] = x[..n as usize].iter().fold(0.0, |s, &v| s + v);
    }
}

tests::on_both_backends_race_free!(
    a_window_streams_new_input_into_each_replay,
    a_forgotten_window_slice_refuses_replays_and_says_so,
    swapped_buffers_ping_pong_without_a_doubled_step,
    loops_spread_chunks_over_a_stream_array,
    disjoint_ranges_of_one_buffer_run_concurrently,
    ranges_are_checked_before_the_step_is_enqueued,
    several_kinds_of_step_share_streams_and_buffers,
    steps_that_run_ahead_compute_what_closed_steps_do,
    host_closures_see_pinned_data_and_use_shared_params,
);

/// Uploads `data` and waits, so the pipeline's streams find it there.
fn upload(ctx: &Context, data: &[f32]) -> Result<DeviceBuffer<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    let buffer = DeviceBuffer::from_slice(&stream, data)?;
    stream.synchronize()?;
    Ok(buffer)
}

gpu_pipeline! {
    /// `output = 2 * input + 1`, through the device.
    pub pipeline Affine {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; unbounded]) cpu = cpu::axpb;
        }
        params {
            n: u32,
            input: &mut PinnedBuffer<f32>,
            x: &mut DeviceBuffer<f32>,
            output: &mut PinnedBuffer<f32>,
        }
        stage load on copy { copy input -> x; }
        stage compute on main { launch k::axpb(n, 2.0, 1.0, x) grid n.div_ceil(128) block 128; }
        stage store on copy { copy x -> output; }
    }
}

fn a_window_streams_new_input_into_each_replay(ctx: &Context) -> Result<()> {
    const N: usize = 100;
    let mut input = PinnedBuffer::<f32>::zeros(ctx, N)?;
    let mut output = PinnedBuffer::<f32>::zeros(ctx, N)?;
    let mut x = upload(ctx, &[0.0; N])?;
    let mut pipeline = Affine::new(ctx)?;
    let mut graph = pipeline.capture(AffineParams {
        n: N as u32,
        input: &mut input,
        x: &mut x,
        output: &mut output,
    })?;
    for replay in 0..6 {
        let frame: Vec<f32> = (0..N).map(|i| (replay * N + i) as f32).collect();
        let mut window = graph.window()?;
        if replay > 0 {
            // The previous replay's output, read between replays.
            let previous: Vec<f32> = (0..N).map(|i| ((replay - 1) * N + i) as f32).collect();
            let want: Vec<f32> = previous.iter().map(|v| 2.0 * v + 1.0).collect();
            assert_eq!(&*window.output()?, &want[..], "replay {}", replay - 1);
        }
        window.input_mut()?.copy_from_slice(&frame);
        window.launch()?;
    }
    graph.synchronize()?;
    let last: Vec<f32> = (0..N).map(|i| 2.0 * (5 * N + i) as f32 + 1.0).collect();
    assert_eq!(graph.window()?.output()?.to_vec(), last);
    Ok(())
}

/// A pinned slice from a window, forgotten, keeps its memory the host's for good: each
/// replay is refused (not reported as a failed step), and the error says why.
fn a_forgotten_window_slice_refuses_replays_and_says_so(ctx: &Context) -> Result<()> {
    const N: usize = 8;
    let mut input = PinnedBuffer::<f32>::zeros(ctx, N)?;
    let mut output = PinnedBuffer::<f32>::zeros(ctx, N)?;
    let mut x = upload(ctx, &[0.0; N])?;
    let mut pipeline = Affine::new(ctx)?;
    let mut graph = pipeline.capture(AffineParams {
        n: N as u32,
        input: &mut input,
        x: &mut x,
        output: &mut output,
    })?;
    graph.launch()?;
    {
        let mut window = graph.window()?;
        std::mem::forget(window.input_mut()?);
    }
    for _ in 0..2 {
        let refused = graph.launch().unwrap_err();
        assert!(
            matches!(refused, gpu_pipeline::Error::InvalidArgument { .. }),
            "{refused:?}"
        );
        let text = refused.to_string();
        assert!(
            text.contains("pipeline `Affine` did not replay its step"),
            "{text}"
        );
        assert!(text.contains("`mem::forget`"), "{text}");
    }
    graph.synchronize()
}

gpu_pipeline! {
    /// One explicit step `next = 0.5 * field + 1`, the grids swapped between replays.
    pub pipeline PingPong {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded]) cpu = cpu::affine;
            fn sum_serial(n: u32, x: &[f32; unbounded], out: &mut [f32; unbounded]) cpu = cpu::sum_serial;
        }
        params {
            n: u32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            total: &mut DeviceBuffer<f32>,
            total_host: &mut PinnedBuffer<f32>,
        }
        swap(field, next);
        stage step on main {
            launch k::affine(n, 0.5, 1.0, field, next) grid n.div_ceil(128) block 128;
            launch k::sum_serial(n, next, total) grid 1u32 block 1u32;
        }
        stage report on copy { copy total -> total_host; }
    }
}

fn swapped_buffers_ping_pong_without_a_doubled_step(ctx: &Context) -> Result<()> {
    const N: usize = 64;
    let init: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let mut field = upload(ctx, &init)?;
    let mut next = upload(ctx, &[0.0; N])?;
    let mut total = upload(ctx, &[0.0])?;
    let mut total_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut pipeline = PingPong::new(ctx)?;
    let mut graph = pipeline.capture(PingPongParams {
        n: N as u32,
        field: &mut field,
        next: &mut next,
        total: &mut total,
        total_host: &mut total_host,
    })?;
    let mut want = init.clone();
    for replay in 0..7 {
        graph.launch()?;
        want = want.iter().map(|v| 0.5 * v + 1.0).collect();
        let sum = want.iter().fold(0.0f32, |s, &v| s + v);
        // The residual-like total of this replay, read between replays.
        assert_eq!(graph.window()?.total_host()?[0], sum, "replay {replay}");
        // The next replay reads what this one wrote.
        graph.swap_field_next()?;
    }
    graph.synchronize()?;
    // After an odd number of swaps the latest values are in what the params call `field`.
    let stream = Stream::non_blocking(ctx)?;
    assert_eq!(graph.params().field.to_vec(&stream)?, want);
    drop(graph);
    // Seven swaps: the grid written last is the one first passed as `next`.
    assert_eq!(next.to_vec(&stream)?, want);
    Ok(())
}

gpu_pipeline! {
    /// Copy in, compute, copy out, chunk by chunk, each chunk on one stream of an array.
    pub pipeline Chunks {
        streams { main, work[lanes] }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; unbounded]) cpu = cpu::axpb;
        }
        params {
            lanes: usize,
            chunks: usize,
            a: f32,
            input: &PinnedBuffer<f32>,
            x: &mut DeviceBuffer<f32>,
            output: &mut PinnedBuffer<f32>,
        }
        for i in 0..chunks {
            let size = x.len().div_ceil(chunks);
            let lo = (i * size).min(x.len());
            let hi = (lo + size).min(x.len());
            stage load on work[i % lanes] { copy input[lo..hi] -> x[lo..hi]; }
            stage compute on work[i % lanes] {
                launch k::axpb((hi - lo) as u32, a, 1.0, x[lo..hi])
                    grid ((hi - lo) as u32).div_ceil(64).max(1) block 64;
            }
            stage store on work[i % lanes] { copy x[lo..hi] -> output[lo..hi]; }
        }
    }
}

fn loops_spread_chunks_over_a_stream_array(ctx: &Context) -> Result<()> {
    const N: usize = 37;
    let data: Vec<f32> = (0..N).map(|i| i as f32 * 0.25).collect();
    let input = PinnedBuffer::from_slice(ctx, &data)?;
    let mut output = PinnedBuffer::<f32>::zeros(ctx, N)?;
    let mut x = upload(ctx, &[0.0; N])?;
    let mut pipeline = Chunks::new(ctx)?;
    // Eager steps of several shapes: the plan follows the params.
    for (lanes, chunks, a) in [(3, 5, 2.0f32), (2, 8, 3.0), (4, 1, -1.0), (1, 37, 0.5)] {
        pipeline
            .run(ChunksParams {
                lanes,
                chunks,
                a,
                input: &input,
                x: &mut x,
                output: &mut output,
            })?
            .wait()?;
        let want: Vec<f32> = data.iter().map(|v| a * v + 1.0).collect();
        assert_eq!(output.to_vec()?, want, "{lanes} lanes, {chunks} chunks");
        assert!(pipeline.work_streams().len() >= lanes);
    }
    // Disjoint chunks on different streams need no event: only the fork and join.
    let dot = pipeline.plan_dot(&ChunksParams {
        lanes: 2,
        chunks: 4,
        a: 1.0,
        input: &input,
        x: &mut x,
        output: &mut output,
    })?;
    assert!(dot.contains("\"load[3]\""), "{dot}");
    assert!(!dot.contains("label=\"RAW"), "{dot}");
    // The same step captured and replayed.
    let mut graph = pipeline.capture(ChunksParams {
        lanes: 3,
        chunks: 4,
        a: 2.0,
        input: &input,
        x: &mut x,
        output: &mut output,
    })?;
    graph.launch()?;
    graph.set_a(4.0)?;
    graph.launch()?;
    let want: Vec<f32> = data.iter().map(|v| 4.0 * v + 1.0).collect();
    assert_eq!(graph.window()?.output()?.to_vec(), want);
    drop(graph);
    // No lanes: refused before anything runs, naming the array and its count.
    let err = pipeline
        .run(ChunksParams {
            lanes: 0,
            chunks: 4,
            a: 1.0,
            input: &input,
            x: &mut x,
            output: &mut output,
        })
        .map(|_| ())
        .expect_err("a stream array of no streams");
    assert!(
        err.to_string()
            .contains("stream array `work` has no streams (its count, `lanes`, is 0)"),
        "{err}"
    );
    Ok(())
}

gpu_pipeline! {
    /// Two halves of one buffer written on two streams (constant ranges, checked when the
    /// program compiles), then a middle range that overlaps both.
    pub pipeline Halves {
        streams { s1, s2 }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn iota(n: u32, offset: f32, x: &mut [f32; unbounded]) cpu = cpu::iota;
        }
        params { x: &mut DeviceBuffer<f32> }
        stage low on s1 { launch k::iota(8, 0.0, x[0..8]) grid 1u32 block 32u32; }
        stage high on s2 { launch k::iota(8, 100.0, x[8..16]) grid 1u32 block 32u32; }
        stage middle on s1 { launch k::iota(4, 50.0, x[6..10]) grid 1u32 block 32u32; }
        concurrent(low, high);
    }
}

fn disjoint_ranges_of_one_buffer_run_concurrently(ctx: &Context) -> Result<()> {
    // `middle` overlaps `high` (on s2): one wait; `low` and `high` none.
    assert_eq!(Halves::EVENT_WAITS_PER_STEP, 2, "{}", Halves::DOT);
    assert!(
        Halves::DOT.contains("\"high\" -> \"middle\" [label=\"WAW x\"]"),
        "{}",
        Halves::DOT
    );
    let mut x = upload(ctx, &[-1.0; 20])?;
    let mut pipeline = Halves::new(ctx)?;
    pipeline.run(HalvesParams { x: &mut x })?.wait()?;
    let mut want: Vec<f32> = (0..8).map(|i| i as f32).collect();
    want.extend((0..8).map(|i| 100.0 + i as f32));
    want.extend([-1.0; 4]);
    want[6..10].copy_from_slice(&[50.0, 51.0, 52.0, 53.0]);
    assert_eq!(x.to_vec(&Stream::non_blocking(ctx)?)?, want);
    Ok(())
}

gpu_pipeline! {
    /// Two ranges of one buffer whose bounds are params, claimed concurrent: the claim is
    /// checked on the actual ranges before each step is enqueued.
    pub pipeline Split {
        streams { s1, s2 }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn iota(n: u32, offset: f32, x: &mut [f32; unbounded]) cpu = cpu::iota;
        }
        params { mid: usize, end: usize, x: &mut DeviceBuffer<f32> }
        stage left on s1 { launch k::iota(mid as u32, 0.0, x[..mid]) grid 1u32 block 64u32; }
        stage right on s2 {
            launch k::iota((end - mid) as u32, 10.0, x[mid..end]) grid 1u32 block 64u32;
        }
        concurrent(left, right);
    }
}

fn ranges_are_checked_before_the_step_is_enqueued(ctx: &Context) -> Result<()> {
    let mut x = upload(ctx, &[-1.0; 16])?;
    let mut pipeline = Split::new(ctx)?;
    pipeline
        .run(SplitParams {
            mid: 6,
            end: 16,
            x: &mut x,
        })?
        .wait()?;
    let stream = Stream::non_blocking(ctx)?;
    let mut want: Vec<f32> = (0..6).map(|i| i as f32).collect();
    want.extend((0..10).map(|i| 10.0 + i as f32));
    assert_eq!(x.to_vec(&stream)?, want);
    // Out of bounds: an error naming the stage and the range, and nothing ran.
    let err = pipeline
        .run(SplitParams {
            mid: 6,
            end: 17,
            x: &mut x,
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("elements 6..17 of `x`, which holds 16"),
        "{err}"
    );
    // A range that ends before it starts.
    let err = pipeline
        .run(SplitParams {
            mid: 12,
            end: 8,
            x: &mut x,
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("elements 12..8"), "{err}");
    assert_eq!(x.to_vec(&stream)?, want, "no stage ran");
    Ok(())
}

gpu_pipeline! {
    /// An iteration `x = 0.5 x + 1`, and a finishing step that copies the result out and
    /// adds it up, over the same streams, kernels and buffers.
    pub pipeline Solver {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; unbounded]) cpu = cpu::axpb;
            fn sum_serial(n: u32, x: &[f32; unbounded], out: &mut [f32; unbounded]) cpu = cpu::sum_serial;
        }
        params {
            n: u32,
            x: &mut DeviceBuffer<f32>,
            total: &mut DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
            total_host: &mut PinnedBuffer<f32>,
        }
        step iterate {
            stage relax on main { launch k::axpb(n, 0.5, 1.0, x) grid n.div_ceil(64) block 64; }
        }
        step finish {
            stage add on main { launch k::sum_serial(n, x, total) grid 1u32 block 1u32; }
            stage save on copy { copy x -> out; }
            stage report on copy { copy total -> total_host; }
        }
    }
}

fn several_kinds_of_step_share_streams_and_buffers(ctx: &Context) -> Result<()> {
    const N: usize = 48;
    let init: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let mut want = init.clone();
    let mut x = upload(ctx, &init)?;
    let mut total = upload(ctx, &[0.0])?;
    let mut out = PinnedBuffer::<f32>::zeros(ctx, N)?;
    let mut total_host = PinnedBuffer::<f32>::zeros(ctx, 1)?;
    let mut pipeline = Solver::new(ctx)?;
    {
        let mut run = pipeline.run_iterate(SolverParams {
            n: N as u32,
            x: &mut x,
            total: &mut total,
            out: &mut out,
            total_host: &mut total_host,
        })?;
        for _ in 0..9 {
            run.then_iterate()?;
        }
        // Ordered on the GPU after the iterations: no host wait in between.
        run.then_finish()?;
        run.wait()?;
    }
    for _ in 0..10 {
        want = want.iter().map(|v| 0.5 * v + 1.0).collect();
    }
    assert_eq!(out.to_vec()?, want);
    assert_eq!(
        total_host.to_vec()?[0],
        want.iter().fold(0.0f32, |s, &v| s + v)
    );
    // The same, captured: one graph per kind of step.
    let mut graph = pipeline.capture(SolverParams {
        n: N as u32,
        x: &mut x,
        total: &mut total,
        out: &mut out,
        total_host: &mut total_host,
    })?;
    for _ in 0..5 {
        graph.launch_iterate()?;
    }
    graph.launch_finish()?;
    for _ in 0..5 {
        want = want.iter().map(|v| 0.5 * v + 1.0).collect();
    }
    let window = graph.window()?;
    assert_eq!(window.out()?.to_vec(), want);
    assert_eq!(
        window.total_host()?[0],
        want.iter().fold(0.0f32, |s, &v| s + v)
    );
    Ok(())
}

gpu_pipeline! {
    /// Two halves, each produced on its own stream and consumed on the origin: a stream can
    /// start the next step's half while the origin still consumes this one's.
    pub pipeline Ahead {
        streams { main, left, right }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; unbounded]) cpu = cpu::axpb;
            fn affine(n: u32, a: f32, b: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded]) cpu = cpu::affine;
        }
        params {
            half: usize,
            x: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
        }
        stage grow_left on left {
            launch k::axpb(half as u32, 1.0, 1.0, x[..half]) grid 1u32 block 64u32;
        }
        stage grow_right on right {
            launch k::axpb(half as u32, 1.0, 2.0, x[half..]) grid 1u32 block 64u32;
        }
        stage combine on main {
            launch k::affine((2 * half) as u32, 2.0, 0.0, x, y) grid 1u32 block 64u32;
        }
    }
}

fn steps_that_run_ahead_compute_what_closed_steps_do(ctx: &Context) -> Result<()> {
    const HALF: usize = 16;
    let init: Vec<f32> = (0..2 * HALF).map(|i| i as f32).collect();
    let mut results = Vec::new();
    for ahead in [false, true] {
        let mut x = upload(ctx, &init)?;
        let mut y = upload(ctx, &[0.0; 2 * HALF])?;
        let mut pipeline = Ahead::new(ctx)?;
        let params = AheadParams {
            half: HALF,
            x: &mut x,
            y: &mut y,
        };
        if ahead {
            pipeline.run_ahead(params, 12)?.wait()?;
        } else {
            pipeline.run_steps(params, 12)?.wait()?;
        }
        let stream = Stream::non_blocking(ctx)?;
        results.push((x.to_vec(&stream)?, y.to_vec(&stream)?));
    }
    assert_eq!(results[0], results[1]);
    let want_x: Vec<f32> = init
        .iter()
        .enumerate()
        .map(|(i, v)| v + if i < HALF { 12.0 } else { 24.0 })
        .collect();
    assert_eq!(results[1].0, want_x);
    let want_y: Vec<f32> = want_x.iter().map(|v| 2.0 * v).collect();
    assert_eq!(results[1].1, want_y);
    Ok(())
}

gpu_pipeline! {
    /// A host closure that reads a snapshot of the field and logs its sum into an
    /// `Arc<Mutex<Vec<f32>>>` param, and one that counts replays in a pinned buffer it writes.
    pub pipeline Logged {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; unbounded]) cpu = cpu::axpb;
        }
        params {
            n: u32,
            log: Arc<Mutex<Vec<f32>>>,
            x: &mut DeviceBuffer<f32>,
            snapshot: &mut PinnedBuffer<f32>,
            counter: &mut PinnedBuffer<u32>,
        }
        stage compute on main { launch k::axpb(n, 1.0, 1.0, x) grid n.div_ceil(64) block 64; }
        stage save on copy { copy x -> snapshot; }
        stage record on copy {
            host |snapshot: &[f32]| {
                let sum = snapshot.iter().fold(0.0f32, |s, &v| s + v);
                log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(sum);
            } reads(snapshot);
            host |counter| { counter[0] += 1; } writes(counter);
        }
    }
}

fn host_closures_see_pinned_data_and_use_shared_params(ctx: &Context) -> Result<()> {
    const N: usize = 10;
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut x = upload(ctx, &[0.0; N])?;
    let mut snapshot = PinnedBuffer::<f32>::zeros(ctx, N)?;
    let mut counter = PinnedBuffer::<u32>::zeros(ctx, 1)?;
    let mut pipeline = Logged::new(ctx)?;
    pipeline
        .run(LoggedParams {
            n: N as u32,
            log: log.clone(),
            x: &mut x,
            snapshot: &mut snapshot,
            counter: &mut counter,
        })?
        .wait()?;
    let mut graph = pipeline.capture(LoggedParams {
        n: N as u32,
        log: log.clone(),
        x: &mut x,
        snapshot: &mut snapshot,
        counter: &mut counter,
    })?;
    for _ in 0..3 {
        graph.launch()?;
    }
    {
        let window = graph.window()?;
        assert_eq!(window.counter()?[0], 4);
        assert_eq!(window.snapshot()?.to_vec(), vec![4.0; N]);
    }
    drop(graph);
    let sums = log.lock().unwrap().clone();
    assert_eq!(sums, [10.0, 20.0, 30.0, 40.0]);
    Ok(())
}
