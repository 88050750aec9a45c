//! When a captured graph waits for its launches (since b14a3b0 only when some may still run):
//! sequences of safe calls that hand a buffer to the host (`recapture_with` taking it out of
//! the params, the graph's drop) right after work enqueued past a `synchronize` or a window,
//! each read at once on another stream, where a replay or host write still in flight would
//! race (the checked CPU backend reports it) or leave a wrong value.

use gpu_pipeline::{CaptureMode, Context, DeviceBuffer, Result, Stream, gpu_pipeline};

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
}

tests::on_both_backends_race_free!(
    a_windows_launch_is_waited_for_by_recapture_with,
    a_host_write_after_a_synchronize_is_waited_for_by_recapture_with_and_drop,
    a_forgotten_clones_launch_after_a_synchronize_is_waited_for_by_the_original,
    a_lent_launch_after_a_synchronize_is_waited_for_by_recapture_with,
    a_launch_after_a_swap_and_a_synchronize_is_waited_for_by_recapture_with,
    a_rebuilding_setter_after_a_synchronize_and_a_launch_waits_for_it,
    a_launch_of_another_kind_after_a_synchronize_is_waited_for,
    a_clone_of_a_synchronized_graph_waits_for_its_own_launches_only,
    a_lent_launch_whose_wait_failed_is_waited_for_by_the_next_recapture,
);

const N: usize = 2048;

/// Uploads `data` and waits, so the pipeline's streams find it there.
fn upload(ctx: &Context, data: &[f32]) -> Result<DeviceBuffer<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    let buffer = DeviceBuffer::from_slice(&stream, data)?;
    stream.synchronize()?;
    Ok(buffer)
}

/// Reads a device buffer back on a stream of its own, ordered after nothing.
fn read(ctx: &Context, buffer: &DeviceBuffer<f32>) -> Result<Vec<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    buffer.to_vec(&stream)
}

gpu_pipeline! {
    /// `next = a * field + 1`, then `v` added to it (a fill of `bias` feeds it: a setter of `v`
    /// builds the step again), the grids swapped between replays.
    pub pipeline Waits {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::affine;
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; n]) cpu = cpu::axpb;
        }
        params {
            n: u32,
            a: f32,
            v: f32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            bias: &mut DeviceBuffer<f32>,
        }
        swap(field, next);
        step forward {
            stage step on main {
                fill bias[0..1] = v;
                launch k::affine(n, a, 1.0, field, next) grid n.div_ceil(64) block 64;
            }
        }
        step shift {
            stage add on main {
                launch k::axpb(n, 1.0, 1.0, next) grid n.div_ceil(64) block 64;
            }
        }
    }
}

/// The three buffers: field = 1, next = 0, bias = 0.
fn buffers(ctx: &Context) -> Result<[DeviceBuffer<f32>; 3]> {
    Ok([
        upload(ctx, &[1.0; N])?,
        upload(ctx, &[0.0; N])?,
        upload(ctx, &[0.0; N])?,
    ])
}

/// The params every case captures with: n = N, a = 2, v = 0.
fn params<'a>(
    field: &'a mut DeviceBuffer<f32>,
    next: &'a mut DeviceBuffer<f32>,
    bias: &'a mut DeviceBuffer<f32>,
) -> WaitsParams<'a> {
    WaitsParams {
        n: N as u32,
        a: 2.0,
        v: 0.0,
        field,
        next,
        bias,
    }
}

/// Takes `next` out of the graph's params with `recapture_with` (`spare` in its place) and
/// reads it at once on another stream: what the host sees once `recapture_with` returns.
fn take_next<'a>(
    ctx: &Context,
    graph: &mut WaitsGraph<'a>,
    spare: &'a mut DeviceBuffer<f32>,
) -> Result<Vec<f32>> {
    let mut taken = None;
    let _ = graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.next, spare)))?;
    read(ctx, taken.expect("the closure ran"))
}

fn a_windows_launch_is_waited_for_by_recapture_with(ctx: &Context) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Waits::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
    graph.launch_forward()?;
    graph.window()?.launch_forward()?; // next = 3 again, after the window's wait
    assert_eq!(take_next(ctx, &mut graph, &mut spare)?, vec![3.0; N]);
    Ok(())
}

fn a_host_write_after_a_synchronize_is_waited_for_by_recapture_with_and_drop(
    ctx: &Context,
) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    {
        let mut pipeline = Waits::new(ctx)?;
        let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
        graph.launch_forward()?;
        graph.synchronize()?;
        graph.write_field()?.fill(5.0)?;
        let mut taken = None;
        let _ =
            graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.field, &mut spare)))?;
        assert_eq!(read(ctx, taken.expect("the closure ran"))?, vec![5.0; N]);
        graph.synchronize()?;
        graph.write_bias()?.fill_range(1..N, 7.0)?;
    }
    // The drop waited for the last host write.
    let mut want = vec![7.0; N];
    want[0] = 0.0;
    assert_eq!(read(ctx, &bias)?, want);
    Ok(())
}

fn a_forgotten_clones_launch_after_a_synchronize_is_waited_for_by_the_original(
    ctx: &Context,
) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Waits::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
    graph.launch_forward()?; // next = 3
    let mut clone = graph.clone_step()?;
    clone.synchronize()?; // the clone's flag cleared, the original's kept
    clone.set_a(4.0)?;
    clone.launch_forward()?; // next = 5
    std::mem::forget(clone);
    assert_eq!(take_next(ctx, &mut graph, &mut spare)?, vec![5.0; N]);
    Ok(())
}

fn a_lent_launch_after_a_synchronize_is_waited_for_by_recapture_with(ctx: &Context) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let foreign = Stream::non_blocking(ctx)?;
    let mut pipeline = Waits::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    graph.set_a(3.0)?;
    graph.exec().expect("captured").launch(&foreign)?; // next = 4, on a foreign stream
    graph.synchronize()?; // the origin's wait; the lent launch is the context's
    assert_eq!(take_next(ctx, &mut graph, &mut spare)?, vec![4.0; N]);
    Ok(())
}

fn a_launch_after_a_swap_and_a_synchronize_is_waited_for_by_recapture_with(
    ctx: &Context,
) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Waits::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
    graph.launch_forward()?; // next = 3
    graph.synchronize()?;
    graph.swap_field_next()?;
    graph.launch_forward()?; // field = 7
    // `field` as declared is the buffer passed as `next` now: the one just written is `next`.
    assert_eq!(take_next(ctx, &mut graph, &mut spare)?, vec![7.0; N]);
    Ok(())
}

fn a_rebuilding_setter_after_a_synchronize_and_a_launch_waits_for_it(ctx: &Context) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Waits::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    graph.launch_forward()?;
    graph.set_v(9.0)?; // a fill value: builds again, after the launch
    let mut taken = None;
    let _ = graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.bias, &mut spare)))?;
    assert_eq!(read(ctx, taken.expect("the closure ran"))?[0], 0.0);
    graph.launch_forward()?;
    drop(graph);
    assert_eq!(read(ctx, &spare)?[0], 9.0);
    assert_eq!(read(ctx, &next)?, vec![3.0; N]);
    Ok(())
}

fn a_launch_of_another_kind_after_a_synchronize_is_waited_for(ctx: &Context) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Waits::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
    graph.launch_forward()?; // next = 3
    graph.synchronize()?;
    graph.launch_shift()?; // next = 4
    assert_eq!(take_next(ctx, &mut graph, &mut spare)?, vec![4.0; N]);
    graph.launch_shift()?; // spare = 1
    drop(graph);
    assert_eq!(read(ctx, &spare)?, vec![1.0; N]);
    Ok(())
}

fn a_clone_of_a_synchronized_graph_waits_for_its_own_launches_only(ctx: &Context) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut other = upload(ctx, &[0.0; N])?;
    let mut pipeline = Waits::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    {
        let mut clone = graph.clone_step()?;
        clone.launch_forward()?;
        let mut taken = None;
        let _ =
            clone.recapture_with(|p| taken = Some(std::mem::replace(&mut p.next, &mut other)))?;
        assert_eq!(read(ctx, taken.expect("the closure ran"))?, vec![3.0; N]);
        clone.launch_shift()?; // other = 1
    }
    assert_eq!(take_next(ctx, &mut graph, &mut spare)?, vec![3.0; N]);
    drop(graph);
    assert_eq!(read(ctx, &other)?, vec![1.0; N]);
    Ok(())
}

/// Found by the red team: a wait for a lent instantiation's launches that fails (here the
/// caller's stream, where they are queued, begins a capture, so the context cannot be
/// synchronized) must leave them marked as possibly running. The flag used to be cleared
/// before the wait, so the next `recapture_with` handed out `next` while they ran.
fn a_lent_launch_whose_wait_failed_is_waited_for_by_the_next_recapture(
    ctx: &Context,
) -> Result<()> {
    let [mut field, mut next, mut bias] = buffers(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let user = Stream::non_blocking(ctx)?;
    let mut pipeline = Waits::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut field, &mut next, &mut bias))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    graph.set_a(3.0)?;
    graph.exec().expect("captured").launch(&user)?; // next = 4, on the caller's stream
    user.begin_capture(CaptureMode::ThreadLocal)?;
    // The context's wait fails during the capture (the CPU backend refuses it), and this
    // recapture with it.
    let _ = graph.recapture_with(|_| {});
    let _ = user.end_capture();
    assert_eq!(take_next(ctx, &mut graph, &mut spare)?, vec![4.0; N]);
    Ok(())
}
