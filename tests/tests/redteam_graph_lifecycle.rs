//! Red team: the lifecycle of a captured graph (in-flight tracking, retired builds, clones,
//! recaptures, swaps, host writes, forgotten guards). Each sequence is safe code that would
//! let a buffer the graph's launches still use reach the host (or another stream), or let a
//! replay use params whose borrow ended, if the graph's bookkeeping were wrong. All of these
//! held when written; the one that did not is in `graph_waits.rs` (a lent launch whose wait
//! failed).

use std::panic::{AssertUnwindSafe, catch_unwind};

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, Stream, gpu_pipeline};

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
    a_panicking_recapture_with_closure_leaves_no_replay_of_the_taken_buffer,
    a_recapture_then_drop_waits_for_the_old_params_launches,
    swap_then_clone_then_forget_is_waited_for_by_the_original,
    a_forgotten_graph_still_fences_its_pinned_output,
    a_forgotten_host_write_handle_is_waited_for,
    a_clone_recaptured_with_new_params_waits_at_its_drop,
    a_lent_launch_of_a_clone_is_waited_for_by_the_original,
    a_recapture_with_after_a_refused_recapture_waits,
    a_window_between_two_clones_waits,
    a_clone_of_a_clone_forgotten_is_waited_for,
);

const N: usize = 2048;

fn upload(ctx: &Context, data: &[f32]) -> Result<DeviceBuffer<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    let buffer = DeviceBuffer::from_slice(&stream, data)?;
    stream.synchronize()?;
    Ok(buffer)
}

fn read(ctx: &Context, buffer: &DeviceBuffer<f32>) -> Result<Vec<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    buffer.to_vec(&stream)
}

gpu_pipeline! {
    /// `next = a * field + 1` (a fill of `bias` with `v` first), `next` copied to `out` on a
    /// second stream; `shift` adds 1 to `next`.
    pub pipeline Red {
        streams { main, side }
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
            out: &mut PinnedBuffer<f32>,
        }
        swap(field, next);
        step forward {
            stage step on main {
                fill bias[0..1] = v;
                launch k::affine(n, a, 1.0, field, next) grid n.div_ceil(64) block 64;
            }
            stage report on side { copy next -> out; }
        }
        step shift {
            stage add on main {
                launch k::axpb(n, 1.0, 1.0, next) grid n.div_ceil(64) block 64;
            }
        }
    }
}

struct Bufs {
    field: DeviceBuffer<f32>,
    next: DeviceBuffer<f32>,
    bias: DeviceBuffer<f32>,
    out: PinnedBuffer<f32>,
}

fn bufs(ctx: &Context) -> Result<Bufs> {
    Ok(Bufs {
        field: upload(ctx, &[1.0; N])?,
        next: upload(ctx, &[0.0; N])?,
        bias: upload(ctx, &[0.0; N])?,
        out: PinnedBuffer::zeros(ctx, N)?,
    })
}

fn params(b: &mut Bufs) -> RedParams<'_> {
    RedParams {
        n: N as u32,
        a: 2.0,
        v: 0.0,
        field: &mut b.field,
        next: &mut b.next,
        bias: &mut b.bias,
        out: &mut b.out,
    }
}

/// The closure takes `next` out and panics: the graph must never replay into it again.
fn a_panicking_recapture_with_closure_leaves_no_replay_of_the_taken_buffer(
    ctx: &Context,
) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Red::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut b))?;
    graph.launch_forward()?; // next = 3
    let mut taken = None;
    let spare_ref = &mut spare;
    let taken_ref = &mut taken;
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        graph.recapture_with(move |p| {
            *taken_ref = Some(std::mem::replace(&mut p.next, spare_ref));
            panic!("edit fails half-way");
        })
    }));
    assert!(panicked.is_err());
    let taken = taken.expect("the closure ran");
    assert_eq!(read(ctx, taken)?, vec![3.0; N]);
    // Every way to replay: each must use `spare`, never `taken`.
    graph.launch_shift()?;
    graph.launch_forward()?;
    let _ = graph
        .exec()
        .map(|e| e.launch(&Stream::non_blocking(ctx).unwrap()));
    {
        let mut clone = graph.clone_step()?;
        clone.launch_forward()?;
        clone.launch_shift()?;
    }
    graph.swap_field_next()?;
    graph.launch_forward()?;
    graph.synchronize()?;
    assert_eq!(read(ctx, taken)?, vec![3.0; N]);
    Ok(())
}

fn a_recapture_then_drop_waits_for_the_old_params_launches(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut c = bufs(ctx)?;
    {
        let mut pipeline = Red::new(ctx)?;
        let mut graph = pipeline.capture(params(&mut b))?;
        for _ in 0..3 {
            graph.launch_forward()?;
            graph.launch_shift()?;
        }
        let _ = graph.recapture(params(&mut c))?; // does not wait
        graph.launch_forward()?;
        graph.launch_shift()?;
    }
    assert_eq!(read(ctx, &b.next)?, vec![4.0; N]);
    assert_eq!(read(ctx, &c.next)?, vec![4.0; N]);
    assert_eq!(&*b.out.as_slice()?, &[3.0; N][..]);
    Ok(())
}

fn swap_then_clone_then_forget_is_waited_for_by_the_original(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut spare2 = upload(ctx, &[0.0; N])?;
    let mut pipeline = Red::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut b))?;
    graph.launch_forward()?; // next = 3
    graph.synchronize()?;
    graph.swap_field_next()?;
    let mut clone = graph.clone_step()?;
    clone.synchronize()?;
    clone.launch_forward()?; // field = 7
    clone.swap_field_next()?;
    clone.launch_forward()?; // next = 15
    clone.launch_shift()?; // next = 16
    std::mem::forget(clone);
    let (mut f, mut n) = (None, None);
    let _ = graph.recapture_with(|p| {
        f = Some(std::mem::replace(&mut p.field, &mut spare));
        n = Some(std::mem::replace(&mut p.next, &mut spare2));
    })?;
    // Swapped: `p.field` is the buffer passed as `next`.
    assert_eq!(read(ctx, f.unwrap())?, vec![16.0; N]);
    assert_eq!(read(ctx, n.unwrap())?, vec![7.0; N]);
    Ok(())
}

fn a_forgotten_graph_still_fences_its_pinned_output(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut pipeline = Red::new(ctx)?;
    {
        let mut graph = pipeline.capture(params(&mut b))?;
        graph.launch_forward()?;
        graph.synchronize()?;
        graph.launch_shift()?;
        graph.launch_forward()?; // next = 3 again, copied to out
        std::mem::forget(graph);
    }
    // Host reads of the pinned output wait for the copy (fences live in the buffer).
    assert_eq!(&*b.out.as_slice()?, &[3.0; N][..]);
    b.out.as_mut_slice()?.fill(-1.0);
    drop(pipeline);
    Ok(())
}

fn a_forgotten_host_write_handle_is_waited_for(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Red::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut b))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    let mut w = graph.write_bias()?;
    w.fill_range(1.., 7.0)?;
    std::mem::forget(w);
    let mut taken = None;
    let _ = graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.bias, &mut spare)))?;
    let mut want = vec![7.0; N];
    want[0] = 0.0;
    assert_eq!(read(ctx, taken.unwrap())?, want);
    Ok(())
}

fn a_clone_recaptured_with_new_params_waits_at_its_drop(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut c = bufs(ctx)?;
    let mut pipeline = Red::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut b))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    {
        let mut clone = graph.clone_step()?;
        clone.synchronize()?;
        let _ = clone.recapture(params(&mut c))?;
        clone.launch_forward()?;
        clone.launch_shift()?;
    }
    assert_eq!(read(ctx, &c.next)?, vec![4.0; N]);
    assert_eq!(&*c.out.as_slice()?, &[3.0; N][..]);
    graph.launch_shift()?;
    drop(graph);
    assert_eq!(read(ctx, &b.next)?, vec![4.0; N]);
    Ok(())
}

fn a_lent_launch_of_a_clone_is_waited_for_by_the_original(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let foreign = Stream::non_blocking(ctx)?;
    let mut pipeline = Red::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut b))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    let mut clone = graph.clone_step()?;
    clone.synchronize()?;
    clone.set_a(3.0)?;
    clone.exec().expect("captured").launch(&foreign)?; // next = 4
    clone.synchronize()?;
    std::mem::forget(clone);
    let mut taken = None;
    let _ = graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.next, &mut spare)))?;
    assert_eq!(read(ctx, taken.unwrap())?, vec![4.0; N]);
    Ok(())
}

fn a_recapture_with_after_a_refused_recapture_waits(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut c = bufs(ctx)?;
    c.next = upload(ctx, &[0.0; 4])?; // shorter than n: the build refuses it
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Red::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut b))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    graph.launch_shift()?; // next = 4, in flight
    assert!(graph.recapture(params(&mut c)).is_err());
    let mut taken = None;
    let r = graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.bias, &mut spare)));
    assert!(r.is_err(), "still refused");
    assert_eq!(read(ctx, taken.unwrap())?, vec![0.0; N]);
    drop(graph);
    assert_eq!(read(ctx, &b.next)?, vec![4.0; N]);
    Ok(())
}

fn a_window_between_two_clones_waits(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Red::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut b))?;
    graph.launch_forward()?;
    {
        let mut clone = graph.clone_step()?;
        let w = clone.window()?;
        assert_eq!(&*w.out()?, &[3.0; N][..]);
        w.launch_shift()?; // next = 4
        let clone2 = clone.clone_step()?;
        drop(clone2);
    }
    let mut taken = None;
    let _ = graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.next, &mut spare)))?;
    assert_eq!(read(ctx, taken.unwrap())?, vec![4.0; N]);
    Ok(())
}

fn a_clone_of_a_clone_forgotten_is_waited_for(ctx: &Context) -> Result<()> {
    let mut b = bufs(ctx)?;
    let mut spare = upload(ctx, &[0.0; N])?;
    let mut pipeline = Red::new(ctx)?;
    let mut graph = pipeline.capture(params(&mut b))?;
    graph.launch_forward()?;
    graph.synchronize()?;
    {
        let mut clone = graph.clone_step()?;
        clone.synchronize()?;
        {
            let mut clone2 = clone.clone_step()?;
            clone2.synchronize()?;
            clone2.launch_shift()?; // next = 4
            std::mem::forget(clone2);
        }
        clone.synchronize()?; // waits origin: clone2's launch too
        clone.launch_shift()?; // 5
        std::mem::forget(clone);
    }
    let mut taken = None;
    let _ = graph.recapture_with(|p| taken = Some(std::mem::replace(&mut p.next, &mut spare)))?;
    assert_eq!(read(ctx, taken.unwrap())?, vec![5.0; N]);
    Ok(())
}

/// A lent instantiation launched into the caller's own capture: the caller's graph replays
/// the step after the pipeline's graph is gone. Its memory stays alive (the graph keeps it)
/// and the pinned output stays fenced: the host never reads it under a replay.
#[test]
fn cpu_a_lent_instantiation_captured_by_the_caller_keeps_and_fences_its_memory() {
    use gpu_pipeline::CaptureMode;
    let ctx = Context::cpu_checked();
    let mut b = bufs(&ctx).unwrap();
    let user = Stream::non_blocking(&ctx).unwrap();
    let captured = {
        let mut pipeline = Red::new(&ctx).unwrap();
        let mut graph = pipeline.capture(params(&mut b)).unwrap();
        user.begin_capture(CaptureMode::ThreadLocal).unwrap();
        graph.exec().expect("captured").launch(&user).unwrap();
        let g = user.end_capture().unwrap();
        drop(graph);
        drop(pipeline);
        g
    };
    let exec = captured.instantiate().unwrap();
    for _ in 0..50 {
        exec.launch(&user).unwrap();
    }
    // The host's read of `out` waits for the caller's replays.
    assert_eq!(&*b.out.as_slice().unwrap(), &[3.0; N][..]);
    b.out.as_mut_slice().unwrap().fill(0.0);
    drop(captured);
    drop(exec);
    user.synchronize().unwrap();
}
