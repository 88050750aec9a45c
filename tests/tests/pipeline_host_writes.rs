//! Host writes between replays into device buffers a captured graph holds
//! (`graph.write_<name>()`: `upload`, `fill`), enqueued on the origin stream in order with
//! the replays, and refused where a replay writes the same elements. Each scenario runs on
//! the checked CPU backend (zero races) and, ignored here, on CUDA.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, Stream, gpu_pipeline};

/// The CPU implementations of the kernels the pipelines below launch.
mod cpu {
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
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

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

tests::on_both_backends_race_free!(
    host_writes_between_replays_run_in_order_with_them,
    a_graph_dropped_after_host_writes_alone_waits_for_them,
    a_host_write_into_a_range_a_replay_writes_is_refused,
    a_host_write_past_the_buffer_is_refused,
    a_condition_set_by_the_host_between_replays_picks_the_branch,
);

/// Uploads `data` and waits, so the pipeline's streams find it there.
fn upload(ctx: &Context, data: &[f32]) -> Result<DeviceBuffer<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    let buffer = DeviceBuffer::from_slice(&stream, data)?;
    stream.synchronize()?;
    Ok(buffer)
}

gpu_pipeline! {
    /// `acc += input` at every replay, with the sum read back on another stream.
    pub pipeline Accumulate {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu::saxpy;
        }
        unsafe kernels l = ptx(include_str!("../kernels/language.ptx")) {
            fn sum_serial(n: u32, x: &[f32; n], out: &mut [f32; 1]) cpu = cpu::sum_serial;
        }
        params {
            n: u32,
            input: &mut DeviceBuffer<f32>,
            acc: &mut DeviceBuffer<f32>,
            total: &mut DeviceBuffer<f32>,
            total_host: &mut PinnedBuffer<f32>,
        }
        stage add on main {
            launch k::saxpy(n, 1.0, input, acc) grid n.div_ceil(64) block 64;
            launch l::sum_serial(n, acc, total) grid 1u32 block 1u32;
        }
        stage report on copy { copy total -> total_host; }
    }
}

/// `Accumulate`'s buffers for `n` elements, all zero: input, acc, total and total_host.
type AccumulateBuffers = (
    DeviceBuffer<f32>,
    DeviceBuffer<f32>,
    DeviceBuffer<f32>,
    PinnedBuffer<f32>,
);

fn accumulate_buffers(ctx: &Context, n: usize) -> Result<AccumulateBuffers> {
    Ok((
        upload(ctx, &vec![0.0; n])?,
        upload(ctx, &vec![0.0; n])?,
        upload(ctx, &[0.0])?,
        PinnedBuffer::<f32>::zeros(ctx, 1)?,
    ))
}

fn host_writes_between_replays_run_in_order_with_them(ctx: &Context) -> Result<()> {
    const N: usize = 200;
    let (mut input, mut acc, mut total, mut total_host) = accumulate_buffers(ctx, N)?;
    let mut frame = PinnedBuffer::<f32>::zeros(ctx, N)?;
    let mut pipeline = Accumulate::new(ctx)?;
    let mut graph = pipeline.capture(AccumulateParams {
        n: N as u32,
        input: &mut input,
        acc: &mut acc,
        total: &mut total,
        total_host: &mut total_host,
    })?;
    // No wait between the writes and the launches: each write lands after the replay before
    // it and before the one after it.
    let mut want = vec![0.0f32; N];
    for k in 1..=12u32 {
        if k % 2 == 0 {
            graph.write_input()?.fill(k as f32)?;
            want.iter_mut().for_each(|v| *v += k as f32);
        } else {
            // The host waits for the previous upload of `frame` before writing it again.
            let values: Vec<f32> = (0..N).map(|i| (i as u32 * k) as f32).collect();
            frame.copy_from_slice(&values)?;
            graph.write_input()?.upload(&frame)?;
            want.iter_mut().zip(&values).for_each(|(w, v)| *w += v);
        }
        graph.launch()?;
    }
    let sum = want.iter().fold(0.0f32, |s, &v| s + v);
    assert_eq!(graph.window()?.total_host()?[0], sum);
    // A part of the buffer, then a replay: the rest keeps the last upload's values.
    {
        let mut write = graph.write_input()?;
        assert_eq!(write.len(), N);
        write.fill_range(..N / 2, 0.5)?;
        let half = PinnedBuffer::from_slice(ctx, &[2.0f32; N / 2])?;
        write.upload_at(N / 2, &half)?;
    }
    graph.launch()?;
    graph.synchronize()?;
    for (i, w) in want.iter_mut().enumerate() {
        *w += if i < N / 2 { 0.5 } else { 2.0 };
    }
    drop(graph);
    let stream = Stream::non_blocking(ctx)?;
    assert_eq!(acc.to_vec(&stream)?, want);
    Ok(())
}

/// A graph that wrote its input and was never launched still waits for the writes when it is
/// dropped (only a graph that enqueued nothing skips that wait): the input read on another
/// stream right after is the written one, with no race.
fn a_graph_dropped_after_host_writes_alone_waits_for_them(ctx: &Context) -> Result<()> {
    const N: usize = 1 << 16;
    let (mut input, mut acc, mut total, mut total_host) = accumulate_buffers(ctx, N)?;
    let values: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let frame = PinnedBuffer::from_slice(ctx, &values)?;
    let mut pipeline = Accumulate::new(ctx)?;
    let mut graph = pipeline.capture(AccumulateParams {
        n: N as u32,
        input: &mut input,
        acc: &mut acc,
        total: &mut total,
        total_host: &mut total_host,
    })?;
    graph.write_input()?.fill(7.0)?;
    graph.write_input()?.upload(&frame)?;
    drop(graph);
    let stream = Stream::non_blocking(ctx)?;
    assert_eq!(input.to_vec(&stream)?, values);
    assert_eq!(acc.to_vec(&stream)?, vec![0.0; N], "nothing was launched");
    Ok(())
}

gpu_pipeline! {
    /// The first `half` elements of `x` written at every replay, the rest only read.
    pub pipeline Halves {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn iota(n: u32, offset: f32, x: &mut [f32; n]) cpu = cpu::iota;
            fn sum_serial(n: u32, x: &[f32; n], out: &mut [f32; 1]) cpu = cpu::sum_serial;
        }
        params {
            half: usize,
            x: &mut DeviceBuffer<f32>,
            total: &mut DeviceBuffer<f32>,
        }
        stage fresh on main {
            launch k::iota(half as u32, 0.0, x[..half]) grid 1u32 block 64;
        }
        stage read on main {
            launch k::sum_serial(half as u32, x[half..], total) grid 1u32 block 1u32;
        }
    }
}

fn a_host_write_into_a_range_a_replay_writes_is_refused(ctx: &Context) -> Result<()> {
    const HALF: usize = 8;
    let mut x = upload(ctx, &[0.0; 2 * HALF])?;
    let mut total = upload(ctx, &[0.0])?;
    let mut pipeline = Halves::new(ctx)?;
    let mut graph = pipeline.capture(HalvesParams {
        half: HALF,
        x: &mut x,
        total: &mut total,
    })?;
    // The half the step only reads.
    graph.write_x()?.fill_range(HALF.., 3.0)?;
    // Any element of the half `fresh` writes, or the whole buffer: refused, nothing enqueued.
    for refused in [
        graph.write_x()?.fill_range(HALF - 1..HALF + 1, 1.0),
        graph.write_x()?.fill(1.0),
        graph
            .write_x()?
            .upload_at(0, &PinnedBuffer::from_slice(ctx, &[1.0f32; 2])?),
    ] {
        let message = refused.unwrap_err().to_string();
        assert!(
            message.contains("that stage `fresh` may write during a replay"),
            "{message}"
        );
    }
    graph.launch()?;
    graph.synchronize()?;
    drop(graph);
    let stream = Stream::non_blocking(ctx)?;
    let mut want: Vec<f32> = (0..HALF).map(|i| i as f32).collect();
    want.extend([3.0; HALF]);
    assert_eq!(x.to_vec(&stream)?, want);
    assert_eq!(total.to_vec(&stream)?, vec![3.0 * HALF as f32]);
    Ok(())
}

fn a_host_write_past_the_buffer_is_refused(ctx: &Context) -> Result<()> {
    const HALF: usize = 4;
    let mut x = upload(ctx, &[0.0; 2 * HALF])?;
    let mut total = upload(ctx, &[0.0])?;
    let mut pipeline = Halves::new(ctx)?;
    let mut graph = pipeline.capture(HalvesParams {
        half: HALF,
        x: &mut x,
        total: &mut total,
    })?;
    let three = PinnedBuffer::from_slice(ctx, &[1.0f32; 3])?;
    let message = graph
        .write_x()?
        .upload_at(2 * HALF - 2, &three)
        .unwrap_err()
        .to_string();
    assert!(message.contains("goes past its 8 elements"), "{message}");
    let message = graph
        .write_x()?
        .fill_range(HALF..usize::MAX, 1.0)
        .unwrap_err()
        .to_string();
    assert!(message.contains("goes past its 8 elements"), "{message}");
    // An upload into the whole buffer takes the whole buffer's worth: a shorter one would
    // leave the rest as the last replay left it.
    let message = graph.write_x()?.upload(&three).unwrap_err().to_string();
    assert!(
        message.contains("into the whole of `x` (8 elements) from 3 elements"),
        "{message}"
    );
    #[allow(clippy::reversed_empty_ranges)]
    let message = graph
        .write_x()?
        .fill_range(3..1, 1.0)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("the range 3..1 ends before it starts"),
        "{message}"
    );
    Ok(())
}

gpu_pipeline! {
    /// Adds 1 to `then` when `flag != 0`, else 10 to `other`: graphConditionalNodes' IF with
    /// its input set between launches.
    pub pipeline Branch {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            flag: &mut DeviceBuffer<u32>,
            then: &mut DeviceBuffer<f32>,
            other: &mut DeviceBuffer<f32>,
        }
        stage decide on main {
            if flag != 0u32 {
                launch k::add_scalar(1u32, 1.0f32, then) grid 1u32 block 1u32;
            } else {
                launch k::add_scalar(1u32, 10.0f32, other) grid 1u32 block 1u32;
            }
        }
    }
}

fn a_condition_set_by_the_host_between_replays_picks_the_branch(ctx: &Context) -> Result<()> {
    let stream = Stream::non_blocking(ctx)?;
    let mut flag = DeviceBuffer::from_slice(&stream, &[0u32])?;
    stream.synchronize()?;
    let mut then = upload(ctx, &[0.0])?;
    let mut other = upload(ctx, &[0.0])?;
    let mut pipeline = Branch::new(ctx)?;
    let mut graph = pipeline.capture(BranchParams {
        flag: &mut flag,
        then: &mut then,
        other: &mut other,
    })?;
    // 1, 0, 1, 1, 0, 1, 1: five replays take the `then` branch, two the `else`.
    for k in 0..7u32 {
        graph.write_flag()?.fill(u32::from(k % 3 != 1))?;
        graph.launch()?;
    }
    graph.synchronize()?;
    drop(graph);
    assert_eq!(then.to_vec(&stream)?, vec![5.0]);
    assert_eq!(other.to_vec(&stream)?, vec![20.0]);
    Ok(())
}

gpu_pipeline! {
    /// `acc += input` on the second device, where `input` and `acc` live; the origin stream
    /// is the first device's. `peek` (on the first device, a peer read) sums `seen`, a
    /// buffer of the second device no stream of the pipeline is on.
    pub pipeline AcrossDevices {
        devices { gpu0, gpu1 }
        streams { main on gpu0, far on gpu1 }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu::saxpy;
        }
        unsafe kernels l = ptx(include_str!("../kernels/language.ptx")) {
            fn sum_serial(n: u32, x: &[f32; n], out: &mut [f32; 1]) cpu = cpu::sum_serial;
        }
        params {
            n: u32,
            input: &mut DeviceBuffer<f32> on gpu1,
            acc: &mut DeviceBuffer<f32> on gpu1,
            seen: &mut DeviceBuffer<f32> on gpu1,
            total: &mut DeviceBuffer<f32> on gpu0,
        }
        stage add on far {
            launch k::saxpy(n, 1.0, input, acc) grid n.div_ceil(64) block 64;
        }
        stage peek on main {
            launch l::sum_serial(n, seen, total) grid 1u32 block 1u32 peer(seen);
        }
    }
}

/// Host writes into buffers of another device than the origin stream's, between replays:
/// `input` through the pipeline's stream on that device, `seen` (no stream of the pipeline
/// is on its device) through one made for it; each in order with the replays around it.
fn host_writes_reach_buffers_of_another_device(gpu0: &Context, gpu1: &Context) -> Result<()> {
    const N: usize = 64;
    let (s0, s1) = (Stream::non_blocking(gpu0)?, Stream::non_blocking(gpu1)?);
    let mut input = DeviceBuffer::from_slice(&s1, &[0.0f32; N])?;
    let mut acc = DeviceBuffer::from_slice(&s1, &[0.0f32; N])?;
    let mut seen = DeviceBuffer::from_slice(&s1, &[0.0f32; N])?;
    let mut total = DeviceBuffer::from_slice(&s0, &[0.0f32])?;
    s0.synchronize()?;
    s1.synchronize()?;
    let mut pipeline = AcrossDevices::new(gpu0, gpu1)?;
    let mut graph = pipeline.capture(AcrossDevicesParams {
        n: N as u32,
        input: &mut input,
        acc: &mut acc,
        seen: &mut seen,
        total: &mut total,
    })?;
    let frame = PinnedBuffer::from_slice(gpu1, &[0.5f32; N])?;
    let mut want = 0.0;
    for k in 1..=6u32 {
        if k % 2 == 0 {
            graph.write_input()?.fill(k as f32)?;
            want += k as f32;
        } else {
            graph.write_input()?.upload(&frame)?;
            want += 0.5;
        }
        graph.write_seen()?.fill(k as f32)?;
        graph.launch()?;
    }
    graph.synchronize()?;
    drop(graph);
    assert_eq!(acc.to_vec(&s1)?, vec![want; N]);
    assert_eq!(total.to_vec(&s0)?, [6.0 * N as f32]);
    Ok(())
}

#[test]
fn host_writes_reach_buffers_of_another_cpu_device() {
    let devices = Context::cpu_checked_devices(2);
    host_writes_reach_buffers_of_another_device(&devices[0], &devices[1]).unwrap();
    for ctx in &devices {
        assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn host_writes_reach_buffers_of_another_gpu() {
    // Counted first: asking for a device that is not there is an API error that
    // compute-sanitizer reports.
    let count = gpu_pipeline::Device::count().unwrap_or(0);
    if count < 2 {
        return println!("skipped: {count} CUDA device(s) visible, this test needs two");
    }
    let (gpu0, gpu1) = (Context::cuda(0).unwrap(), Context::cuda(1).unwrap());
    host_writes_reach_buffers_of_another_device(&gpu0, &gpu1).unwrap();
}
