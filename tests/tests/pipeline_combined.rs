//! The language of issue 14 (loops, stream arrays, ranges, swaps, kinds of step) combined with
//! what issues 12, 15 and 17 added beside it: kernel bounds checked per stage instance on the
//! lengths of the ranges, graphs built node by node from a plan shaped at run time (exactly
//! its edges), in-place setters across swap arrangements, `while`/`if` inside loops on ranges,
//! fault tracking in built graphs, and pipelines over several devices with stream arrays and
//! loops. Each scenario runs on the checked CPU backend (results against a CPU reference, no
//! race) and, ignored without a GPU, on CUDA.

use gpu_pipeline::{Context, DeviceBuffer, Error, PinnedBuffer, Result, Stream, gpu_pipeline};

/// The CPU implementations of `tests/kernels/language.cu` and of `add_scalar` in
/// `runtime/kernels/test_kernels.cu`: they index with the `n` they are given, as the kernels
/// do, so only the bound checks keep them within their buffers.
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

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

tests::on_both_backends_race_free!(
    bounds_are_checked_per_loop_instance_on_range_lengths,
    a_graph_built_from_a_plan_has_exactly_the_plans_edges,
    setters_reach_every_swap_arrangement_and_swaps_respect_bounds,
    while_and_if_run_inside_loops_on_ranges,
);

fn upload(stream: &Stream, data: &[f32]) -> Result<DeviceBuffer<f32>> {
    let buffer = DeviceBuffer::from_slice(stream, data)?;
    stream.synchronize()?;
    Ok(buffer)
}

fn download(stream: &Stream, buffer: &DeviceBuffer<f32>) -> Result<Vec<f32>> {
    let data = buffer.to_vec(stream)?;
    stream.synchronize()?;
    Ok(data)
}

/// The error a refused bound gives: the stage's error around the kernel's `KernelBound`.
fn assert_bound_refused(err: &Error, stage: &str) {
    match err {
        Error::Stage {
            stage: refused,
            source,
            ..
        } => {
            assert_eq!(*refused, stage, "{err}");
            assert!(matches!(**source, Error::KernelBound { .. }), "{source}");
        }
        other => panic!("expected a refused bound in stage `{stage}`, got {other}"),
    }
}

gpu_pipeline! {
    /// Chunk `i` of `x` (a range of it) scaled on stream `lane[i % lanes]`: the kernel indexes
    /// its buffer below `n`, which each launch takes from its chunk's length plus `extra`.
    pub pipeline Chunked {
        streams { main, lane[lanes] }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; n]) cpu = cpu::axpb;
        }
        params {
            lanes: usize,
            chunks: usize,
            extra: u32,
            a: f32,
            x: &mut DeviceBuffer<f32>,
        }
        for i in 0..chunks {
            let size = x.len() / chunks;
            let lo = i * size;
            stage scale on lane[i % lanes] {
                launch k::axpb(size as u32 + extra, a, 1.0, x[lo..lo + size]) grid 1u32 block 64u32;
            }
        }
    }
}

/// Each instance of a loop stage checks its launch against the length of its own range: an
/// `n` one past the chunk is refused before any chunk is touched, eagerly, at capture, and by
/// an in-place setter (which leaves the graph as it was).
fn bounds_are_checked_per_loop_instance_on_range_lengths(ctx: &Context) -> Result<()> {
    const N: usize = 48;
    let stream = Stream::non_blocking(ctx)?;
    let start: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let mut x = upload(&stream, &start)?;
    let mut pipeline = Chunked::new(ctx)?;
    fn params(extra: u32, x: &mut DeviceBuffer<f32>) -> ChunkedParams<'_> {
        ChunkedParams {
            lanes: 3,
            chunks: 4,
            extra,
            a: 2.0,
            x,
        }
    }
    pipeline.run(params(0, &mut x))?.wait()?;
    let once: Vec<f32> = start.iter().map(|v| 2.0 * v + 1.0).collect();
    assert_eq!(download(&stream, &x)?, once);

    // One past each chunk: refused before anything is enqueued.
    let err = pipeline.run(params(1, &mut x)).map(|_| ()).unwrap_err();
    assert_bound_refused(&err, "scale");
    let err = pipeline.capture(params(1, &mut x)).map(|_| ()).unwrap_err();
    assert_bound_refused(&err, "scale");
    assert_eq!(download(&stream, &x)?, once, "nothing ran");

    {
        let mut graph = pipeline.capture(params(0, &mut x))?;
        graph.launch()?;
        let err = graph.set_extra(1).unwrap_err();
        assert_bound_refused(&err, "scale");
        assert_eq!(graph.params().extra, 0, "the previous value is kept");
        // In place: `a` reaches every instance's node at the next launch.
        graph.set_a(0.5)?;
        graph.launch()?;
        graph.synchronize()?;
    }
    let want: Vec<f32> = once
        .iter()
        .map(|v| 2.0 * v + 1.0)
        .map(|v| 0.5 * v + 1.0)
        .collect();
    assert_eq!(download(&stream, &x)?, want);
    Ok(())
}

gpu_pipeline! {
    /// Chunks copied in and scaled on two lanes, then summed on the origin: a plan made when
    /// the step runs, built as a graph.
    pub pipeline Gather {
        streams { main, lane[2] }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; n]) cpu = cpu::axpb;
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::affine;
        }
        params {
            chunks: usize,
            input: &PinnedBuffer<f32>,
            x: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
        }
        for i in 0..chunks {
            let size = x.len() / chunks;
            let lo = i * size;
            let hi = lo + size;
            stage up on lane[i % 2] { copy input[lo..hi] -> x[lo..hi]; }
            stage grow on lane[i % 2] {
                launch k::axpb(size as u32, 3.0, 0.0, x[lo..hi]) grid 1u32 block 64u32;
            }
        }
        stage total on main {
            launch k::affine(x.len() as u32, 1.0, 1.0, x, y) grid 1u32 block 64u32;
        }
    }
}

/// A step shaped at run time is built from its plan node by node: lane 0 holds `up0 grow0
/// up2 grow2`, lane 1 the odd chunks (three stream-order edges each), and `total` waits for
/// the last `grow` of each lane only (the earlier ones come before them on their lanes): 8
/// edges, no fork or join. With fault tracking on, the marks are nodes beside the stages and
/// the results are the same.
fn a_graph_built_from_a_plan_has_exactly_the_plans_edges(ctx: &Context) -> Result<()> {
    const N: usize = 32;
    let stream = Stream::non_blocking(ctx)?;
    let data: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let input = PinnedBuffer::from_slice(ctx, &data)?;
    let mut x = upload(&stream, &[0.0; N])?;
    let mut y = upload(&stream, &[0.0; N])?;
    let mut pipeline = Gather::new(ctx)?;
    let want: Vec<f32> = data.iter().map(|v| 3.0 * v + 1.0).collect();
    for tracking in [false, true] {
        pipeline.set_fault_tracking(tracking);
        let mut graph = pipeline.capture(GatherParams {
            chunks: 4,
            input: &input,
            x: &mut x,
            y: &mut y,
        })?;
        if !tracking {
            assert_eq!(graph.edge_count()?, 8);
            assert_eq!(graph.node_count()?, 9);
        }
        graph.launch()?;
        graph.launch()?;
        graph.synchronize()?;
        drop(graph);
        assert_eq!(download(&stream, &y)?, want, "tracking {tracking}");
    }
    Ok(())
}

gpu_pipeline! {
    /// `b = scale * a + 1` (a bound below `n` on both), then `a` grown by `step` in place,
    /// below `n` too; `a` and `b` swap between replays.
    pub pipeline Swapped {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::affine;
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; n]) cpu = cpu::axpb;
        }
        params {
            n: u32,
            m: u32,
            scale: f32,
            step: f32,
            a: &mut DeviceBuffer<f32>,
            b: &mut DeviceBuffer<f32>,
        }
        swap(a, b);
        stage next on main {
            launch k::affine(n, scale, 1.0, a, b) grid 1u32 block 64u32;
            launch k::axpb(m, 1.0, step, a) grid 1u32 block 64u32;
        }
    }
}

/// The CPU reference of one `Swapped` replay on `(a, b)`.
fn swapped_reference(a: &mut [f32], b: &mut [f32], n: usize, m: usize, scale: f32, step: f32) {
    for i in 0..n {
        b[i] = scale * a[i] + 1.0;
    }
    for v in &mut a[..m] {
        *v += step;
    }
}

/// An in-place setter reaches the arrangement that is current and, at their next launch, the
/// others (each keeps its own stale marks); a swap into an arrangement whose buffers break a
/// bound is refused and changes nothing, whether that arrangement was built before or not.
fn setters_reach_every_swap_arrangement_and_swaps_respect_bounds(ctx: &Context) -> Result<()> {
    const N: usize = 16;
    const SHORT: usize = 8;
    let stream = Stream::non_blocking(ctx)?;
    let a0: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let b0: Vec<f32> = vec![0.0; SHORT];
    let mut a = upload(&stream, &a0)?;
    let mut b = upload(&stream, &b0)?;
    let (mut ra, mut rb) = (a0.clone(), b0.clone());
    let mut pipeline = Swapped::new(ctx)?;
    {
        // `m` reaches past `b`'s end once the buffers are swapped, so that swap is refused.
        let mut graph = pipeline.capture(SwappedParams {
            n: SHORT as u32,
            m: N as u32,
            scale: 2.0,
            step: 1.0,
            a: &mut a,
            b: &mut b,
        })?;
        graph.launch()?;
        swapped_reference(&mut ra, &mut rb, SHORT, N, 2.0, 1.0);
        let err = graph.swap_a_b().unwrap_err();
        assert_bound_refused(&err, "next");
        assert_eq!(graph.params().a.len(), N, "the arrangement is unchanged");
        // Within both buffers: the swap builds the other arrangement.
        graph.set_m(SHORT as u32)?;
        graph.swap_a_b()?;
        graph.launch()?;
        swapped_reference(&mut rb, &mut ra, SHORT, SHORT, 2.0, 1.0);
        // Set in the swapped arrangement; the first one updates when launched.
        graph.set_scale(3.0)?;
        graph.set_step(-1.0)?;
        graph.launch()?;
        swapped_reference(&mut rb, &mut ra, SHORT, SHORT, 3.0, -1.0);
        graph.swap_a_b()?;
        graph.launch()?;
        swapped_reference(&mut ra, &mut rb, SHORT, SHORT, 3.0, -1.0);
        // Allowed where it is current, then refused by the other, already built one.
        graph.set_m(N as u32)?;
        let err = graph.swap_a_b().unwrap_err();
        assert_bound_refused(&err, "next");
        graph.launch()?;
        swapped_reference(&mut ra, &mut rb, SHORT, N, 3.0, -1.0);
        // Back within both: the swaps go through again (the other arrangement checked anew
        // after the setter), and the ping-pong goes on.
        graph.set_m(SHORT as u32)?;
        for round in 0..4 {
            graph.swap_a_b()?;
            graph.launch()?;
            if round % 2 == 0 {
                swapped_reference(&mut rb, &mut ra, SHORT, SHORT, 3.0, -1.0);
            } else {
                swapped_reference(&mut ra, &mut rb, SHORT, SHORT, 3.0, -1.0);
            }
        }
        graph.synchronize()?;
    }
    assert_eq!(download(&stream, &a)?, ra);
    assert_eq!(download(&stream, &b)?, rb);
    Ok(())
}

gpu_pipeline! {
    /// Per chunk of `x`: on every other step, `x[chunk] += 1`; then a device loop that adds 1
    /// to the chunk and to `count` until `count` reaches `limit`.
    pub pipeline LoopedControl {
        streams { main, lane[2] }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            chunks: usize,
            limit: f32,
            x: &mut DeviceBuffer<f32>,
            count: &mut DeviceBuffer<f32>,
        }
        for i in 0..chunks {
            let size = x.len() / chunks;
            let lo = i * size;
            stage chunk on lane[i % 2] {
                if step % 2 == 0 {
                    launch k::add_scalar(size as u32, 1.0, x[lo..lo + size]) grid 1u32 block 64u32;
                }
                while count < limit max 100 {
                    launch k::add_scalar(size as u32, 1.0, x[lo..lo + size]) grid 1u32 block 64u32;
                    launch k::add_scalar(1u32, 1.0, count) grid 1u32 block 1u32;
                }
            }
        }
    }
}

/// `if` and `while` inside a loop stage, their bodies on ranges: decided on the host in eager
/// steps and on the device in the built graph, with the same results. The chunks share
/// `count`, so they are ordered: the first chunk's loop raises it to `limit` and the others'
/// run no iteration.
fn while_and_if_run_inside_loops_on_ranges(ctx: &Context) -> Result<()> {
    const N: usize = 12;
    let stream = Stream::non_blocking(ctx)?;
    let mut x = upload(&stream, &[0.0; N])?;
    let mut count = upload(&stream, &[0.0])?;
    let mut pipeline = LoopedControl::new(ctx)?;
    // Step 0 (eager): every chunk +1 (the `if`), chunk 0 +3 more (the loop, count 0 -> 3).
    pipeline
        .run(LoopedControlParams {
            chunks: 3,
            limit: 3.0,
            x: &mut x,
            count: &mut count,
        })?
        .wait()?;
    let mut want = [1.0f32; N];
    want[..4].iter_mut().for_each(|v| *v += 3.0);
    assert_eq!(download(&stream, &x)?, want);
    assert_eq!(download(&stream, &count)?, [3.0]);
    {
        // Steps 1 and 2 as replays, the limit raised to 5: step 1 skips the `if`, chunk 0
        // loops twice; step 2 adds 1 everywhere and nothing loops.
        let mut graph = pipeline.capture(LoopedControlParams {
            chunks: 3,
            limit: 5.0,
            x: &mut x,
            count: &mut count,
        })?;
        graph.launch()?;
        graph.launch()?;
        graph.synchronize()?;
    }
    want[..4].iter_mut().for_each(|v| *v += 2.0);
    want.iter_mut().for_each(|v| *v += 1.0);
    assert_eq!(download(&stream, &x)?, want);
    assert_eq!(download(&stream, &count)?, [5.0]);
    Ok(())
}

gpu_pipeline! {
    /// Chunk `i` of `far` (on `gpu1`) grown on `lane[i % lanes]` there and copied into the
    /// same range of `near` (on `gpu0`), which the origin then grows whole.
    pub pipeline SpreadOver {
        devices { gpu0, gpu1 }
        streams { main on gpu0, lane[lanes] on gpu1 }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            lanes: usize,
            chunks: usize,
            far: &mut DeviceBuffer<f32> on gpu1,
            near: &mut DeviceBuffer<f32> on gpu0,
        }
        for i in 0..chunks {
            let size = far.len() / chunks;
            let lo = i * size;
            let hi = lo + size;
            stage grow on lane[i % lanes] {
                launch k::add_scalar(size as u32, 1.0, far[lo..hi]) grid 1u32 block 64u32;
                copy far[lo..hi] -> near[lo..hi];
            }
        }
        stage finish on main {
            launch k::add_scalar(near.len() as u32, 10.0, near) grid 1u32 block 64u32;
        }
    }
}

/// A stream array on the second device and a loop of peer copies of ranges into the first:
/// each instance's events live on its own device, eagerly and in the captured graph (which
/// spans both devices, so it is captured from the streams).
fn a_loop_over_a_stream_array_spans_two_devices(gpu0: &Context, gpu1: &Context) -> Result<()> {
    const N: usize = 24;
    let s0 = Stream::non_blocking(gpu0)?;
    let s1 = Stream::non_blocking(gpu1)?;
    let mut far = upload(&s1, &[0.0; N])?;
    let mut near = upload(&s0, &[0.0; N])?;
    let mut pipeline = SpreadOver::new(gpu0, gpu1)?;
    pipeline
        .run(SpreadOverParams {
            lanes: 3,
            chunks: 4,
            far: &mut far,
            near: &mut near,
        })?
        .wait()?;
    assert_eq!(download(&s1, &far)?, [1.0; N]);
    assert_eq!(download(&s0, &near)?, [11.0; N]);
    {
        let mut graph = pipeline.capture(SpreadOverParams {
            lanes: 2,
            chunks: 6,
            far: &mut far,
            near: &mut near,
        })?;
        graph.launch()?;
        graph.launch()?;
        graph.synchronize()?;
    }
    assert_eq!(download(&s1, &far)?, [3.0; N]);
    assert_eq!(download(&s0, &near)?, [13.0; N]);
    Ok(())
}

#[test]
fn a_loop_over_a_stream_array_spans_two_cpu_devices() {
    let devices = Context::cpu_checked_devices(2);
    a_loop_over_a_stream_array_spans_two_devices(&devices[0], &devices[1]).unwrap();
    assert!(devices[0].races().is_empty(), "{:#?}", devices[0].races());
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn a_loop_over_a_stream_array_spans_two_gpus() {
    // Counted first: asking for a device that is not there is an API error that
    // compute-sanitizer reports.
    let count = gpu_pipeline::Device::count().unwrap_or(0);
    if count < 2 {
        return println!("skipped: {count} CUDA device(s) visible, this test needs two");
    }
    let (gpu0, gpu1) = (Context::cuda(0).unwrap(), Context::cuda(1).unwrap());
    a_loop_over_a_stream_array_spans_two_devices(&gpu0, &gpu1).unwrap();
}
