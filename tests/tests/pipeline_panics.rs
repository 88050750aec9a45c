//! A panic half-way through a change of a captured step, or through an eager step, in a user
//! expression the step evaluates (a `for` range here) or a `call`ed function: the panic goes
//! on, and what it leaves behind is never launched unchecked, never raced and never stuck.
//!
//! - A setter that builds the step again, or `recapture`, that panics leaves the params ahead
//!   of every instantiation: the next launch builds the step from them again, checking them
//!   (here it refuses a bound), instead of replaying old nodes or updating them in place with
//!   values no check saw.
//! - An eager step that panics after some stages were enqueued waits for them before the
//!   panic ends the params' borrow, as an error does.
//! - A step recorded by stream capture (a pipeline over two devices) that panics ends the
//!   capture, so the pipeline keeps working.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use gpu_pipeline::{
    Context, DeviceBuffer, PinnedBuffer, Result, Stream, TypedStream, gpu_pipeline,
};

mod cpu {
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

    pub fn axpb(n: u32, a: f32, b: f32, x: &mut [f32]) {
        for v in &mut x[..n as usize] {
            *v = a * *v + b;
        }
    }
}

tests::on_both_backends_race_free!(
    a_setter_that_panics_while_building_leaves_nothing_unchecked_to_launch,
    a_clone_whose_scratch_setter_panics_leaves_the_original_launchable,
    a_recapture_that_panics_leaves_nothing_unchecked_to_launch,
    an_eager_step_that_panics_waits_for_its_started_stages,
);

thread_local! {
    /// Set by a test to make the next expression of the step panic (on this thread, where
    /// the step's expressions and calls run).
    static PANIC_NEXT: Cell<bool> = const { Cell::new(false) };
}

/// Panics once when the test asked for it; otherwise 1.
pub fn once(_n: u32) -> usize {
    if PANIC_NEXT.with(|p| p.replace(false)) {
        panic!("a step expression panicked (on purpose)");
    }
    1
}

/// A `call` that panics once when the test asked for it.
pub fn maybe_panic(_stream: &TypedStream<'_, SplitSide>) -> Result<()> {
    once(0);
    Ok(())
}

/// `f` run with the step's next expression panicking: the panic must reach us.
fn panicking<R>(f: impl FnOnce() -> R) {
    PANIC_NEXT.with(|p| p.set(true));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    PANIC_NEXT.with(|p| p.set(false));
    assert!(outcome.is_err(), "the step's expression did not panic");
}

gpu_pipeline! {
    /// `next = a * field + 1`, in a `for` whose range (one stage) is a user expression.
    pub pipeline Guarded {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::affine;
        }
        params { n: u32, a: f32, field: &mut DeviceBuffer<f32>, next: &mut DeviceBuffer<f32> }
        for i in 0..crate::once(n) {
            stage sweep on main {
                launch k::affine(n, a, 1.0, field, next) grid n.div_ceil(64) block 64;
            }
        }
    }
}

fn upload(ctx: &Context, data: &[f32]) -> Result<DeviceBuffer<f32>> {
    let stream = Stream::non_blocking(ctx)?;
    let buffer = DeviceBuffer::from_slice(&stream, data)?;
    stream.synchronize()?;
    Ok(buffer)
}

fn read(ctx: &Context, buffer: &DeviceBuffer<f32>) -> Result<Vec<f32>> {
    buffer.to_vec(&Stream::non_blocking(ctx)?)
}

fn a_setter_that_panics_while_building_leaves_nothing_unchecked_to_launch(
    ctx: &Context,
) -> Result<()> {
    let mut field = upload(ctx, &[1.0; 64])?;
    let mut next = upload(ctx, &[0.0; 64])?;
    let mut pipeline = Guarded::new(ctx)?;
    let mut graph = pipeline.capture(GuardedParams {
        n: 64,
        a: 1.0,
        field: &mut field,
        next: &mut next,
    })?;
    graph.launch()?;
    // `n` feeds the `for` range, so its setter builds the step again: the build panics
    // with 1000 in the params, a value no bound check saw (the buffers hold 64).
    panicking(|| graph.set_n(1000));
    // An in-place setter after it, then a launch: built again from the params, and refused
    // by `affine`'s bound, not replayed (nor updated in place) with n = 1000.
    graph.set_a(3.0)?;
    let refused = graph
        .launch()
        .expect_err("n = 1000 breaks the bound of 64-element buffers");
    assert!(refused.kernel_bound().is_some(), "{refused}");
    graph.set_n(64)?;
    graph.launch()?;
    drop(graph);
    assert_eq!(read(ctx, &next)?, vec![4.0; 64]);
    Ok(())
}

fn a_recapture_that_panics_leaves_nothing_unchecked_to_launch(ctx: &Context) -> Result<()> {
    let mut field = upload(ctx, &[1.0; 64])?;
    let mut next = upload(ctx, &[0.0; 64])?;
    let mut short = upload(ctx, &[1.0; 8])?;
    let mut short_next = upload(ctx, &[0.0; 8])?;
    let mut pipeline = Guarded::new(ctx)?;
    let mut graph = pipeline.capture(GuardedParams {
        n: 64,
        a: 2.0,
        field: &mut field,
        next: &mut next,
    })?;
    graph.launch()?; // next = 3
    // New params with 8-element buffers, n still 64: the build panics before its check.
    panicking(|| {
        graph.recapture(GuardedParams {
            n: 64,
            a: 2.0,
            field: &mut short,
            next: &mut short_next,
        })
    });
    // Neither the old instantiation (the old buffers) nor a node updated in place runs.
    let refused = graph
        .launch()
        .expect_err("n = 64 breaks the bound of 8-element buffers");
    assert!(refused.kernel_bound().is_some(), "{refused}");
    graph.set_n(8)?;
    graph.launch()?; // short_next = 3
    drop(graph);
    assert_eq!(read(ctx, &next)?, vec![3.0; 64]);
    assert_eq!(read(ctx, &short_next)?, vec![3.0; 8]);
    Ok(())
}

/// A scratch length that panics once when asked.
pub fn length(m: u32) -> usize {
    once(m) * m as usize
}

gpu_pipeline! {
    /// `x = a * tmp`, `tmp` a scratch buffer of 5s whose length is a user expression.
    pub pipeline Scratched {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = cpu::affine;
        }
        params { n: u32, a: f32, m: u32, x: &mut DeviceBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = crate::length(m) }
        stage scale on main {
            fill tmp = 5.0;
            launch k::affine(n, a, 0.0, tmp, x) grid 1u32 block 32u32;
        }
    }
}

/// A clone's setter of a scratch length takes the pipeline's scratch buffers out to build
/// again; when the build panics, they are gone, and the original (built with them) must be
/// built again at its next launch, not replayed or updated in place as if they were there.
fn a_clone_whose_scratch_setter_panics_leaves_the_original_launchable(ctx: &Context) -> Result<()> {
    let mut x = upload(ctx, &[0.0; 4])?;
    let mut pipeline = Scratched::new(ctx)?;
    let mut graph = pipeline.capture(ScratchedParams {
        n: 4,
        a: 1.0,
        m: 4,
        x: &mut x,
    })?;
    graph.launch()?;
    graph.synchronize()?;
    {
        let mut clone = graph.clone_step()?;
        panicking(|| clone.set_m(4));
    }
    graph.set_a(2.0)?;
    graph.launch()?;
    graph.synchronize()?;
    drop(graph);
    assert_eq!(read(ctx, &x)?, vec![10.0; 4]);
    Ok(())
}

gpu_pipeline! {
    /// A kernel and a copy on `main`, beside a `call` on `side` that may panic.
    pub pipeline Split {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn iota(n: u32, offset: f32, x: &mut [f32; n]) cpu = cpu::iota;
        }
        params { n: u32, offset: f32, x: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage fill on main {
            launch k::iota(n, offset, x) grid n.div_ceil(64) block 64;
            copy x -> out;
        }
        stage check on side { call crate::maybe_panic(); }
        concurrent(fill, check);
    }
}

fn an_eager_step_that_panics_waits_for_its_started_stages(ctx: &Context) -> Result<()> {
    let mut x = upload(ctx, &[0.0; 256])?;
    let mut out = PinnedBuffer::<f32>::zeros(ctx, 256)?;
    let mut pipeline = Split::new(ctx)?;
    for (k, way) in ["run", "run_ahead", "profile"].into_iter().enumerate() {
        // A new value each time: a read before the kernel ran would see the last one.
        let offset = 1000.0 * (k + 1) as f32;
        let expected: Vec<f32> = (0..256).map(|i| offset + i as f32).collect();
        panicking(|| {
            let params = SplitParams {
                n: 256,
                offset,
                x: &mut x,
                out: &mut out,
            };
            match way {
                "run" => pipeline.run(params).map(drop),
                "run_ahead" => pipeline.run_ahead(params, 3).map(drop),
                _ => pipeline.profile(params).map(drop),
            }
        });
        // The borrow is over: read on another stream at once. Unwaited, the kernel would
        // still be writing `x` (the checked backend reports the race).
        assert_eq!(read(ctx, &x)?, expected, "{way}");
        assert_eq!(out.as_slice()?, &expected[..], "{way}");
    }
    // The pipeline still runs.
    pipeline
        .run(SplitParams {
            n: 256,
            offset: 1.0,
            x: &mut x,
            out: &mut out,
        })?
        .wait()?;
    assert_eq!(out.as_slice()?[255], 256.0);
    Ok(())
}

gpu_pipeline! {
    /// Over two devices, so a graph of it is recorded by stream capture.
    pub pipeline TwoDevices {
        devices { gpu0, gpu1 }
        streams { main on gpu0, other on gpu1 }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; n]) cpu = cpu::axpb;
        }
        params { n: u32, x: &mut DeviceBuffer<f32> on gpu0, y: &mut DeviceBuffer<f32> on gpu1 }
        stage a on main {
            launch k::axpb(n, 1.0, 1.0, x) grid 1u32 block 64u32;
            call crate::recorded(n);
        }
        stage b on other { launch k::axpb(n, 1.0, 1.0, y) grid 1u32 block 64u32; }
    }
}

/// A `call` recorded into the graph (its stream capturing) that panics once when asked.
pub fn recorded(_stream: &TypedStream<'_, TwoDevicesMain>, _n: u32) -> Result<()> {
    once(0);
    Ok(())
}

/// The stream-capture build (pipelines over several devices, or that communicate) ends its
/// capture when the step panics: before, the origin stayed capturing and refused every
/// later call of the graph, and of the pipeline after it.
#[test]
fn a_captured_step_that_panics_ends_its_capture() {
    let ctxs = Context::cpu_checked_devices(2);
    let (s0, s1) = (
        Stream::new(&ctxs[0]).unwrap(),
        Stream::new(&ctxs[1]).unwrap(),
    );
    let mut x = DeviceBuffer::from_slice(&s0, &[0.0f32; 4]).unwrap();
    let mut y = DeviceBuffer::from_slice(&s1, &[0.0f32; 4]).unwrap();
    s0.synchronize().unwrap();
    s1.synchronize().unwrap();
    let mut pipeline = TwoDevices::new(&ctxs[0], &ctxs[1]).unwrap();
    {
        let mut graph = pipeline
            .capture(TwoDevicesParams {
                n: 4,
                x: &mut x,
                y: &mut y,
            })
            .unwrap();
        graph.launch().unwrap(); // 1
        // `n` reaches a `call`, so its setter records the step again: the call panics
        // while the origin stream captures.
        panicking(|| graph.set_n(4));
        graph.set_n(4).unwrap();
        graph.launch().unwrap(); // 2
        graph.synchronize().unwrap();
    }
    pipeline
        .run(TwoDevicesParams {
            n: 4,
            x: &mut x,
            y: &mut y,
        })
        .unwrap()
        .wait()
        .unwrap(); // 3
    assert_eq!(x.to_vec(&s0).unwrap(), vec![3.0; 4]);
    assert_eq!(y.to_vec(&s1).unwrap(), vec![3.0; 4]);
    for ctx in &ctxs {
        assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    }
}
