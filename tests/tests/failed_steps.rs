//! A step refused part-way (a device loop at its `max`, a `call` whose function fails)
//! leaves nothing of it running: `run` returns the error only once every stream is idle, so
//! the host's reads of the params and the next step are ordered after the stages it had
//! started on other streams. On the checked CPU backend the race detector finds nothing;
//! the same scenarios run on CUDA (ignored without a GPU) for their values. What the params
//! alone decide (a condition buffer with no element) is refused before anything runs.

use gpu_pipeline::{Context, DeviceBuffer, Error, Result, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

gpu_pipeline! {
    /// `bump` on `other` writes `y` while `count` on `main` lowers `r` by one per iteration,
    /// at most `limit` times: with `r` above `limit` the step fails at the loop's maximum,
    /// after `bump` was started.
    pipeline Bounded {
        streams { main, other }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = crate::cpu::add_scalar;
        }
        params { limit: u32, y: &mut DeviceBuffer<f32>, r: &mut DeviceBuffer<f32> }
        stage bump on other { launch k::add_scalar(1u32, 1.0f32, y) grid 1u32 block 1u32; }
        stage count on main {
            while r > 0.5f32 max limit {
                launch k::add_scalar(1u32, -1.0f32, r) grid 1u32 block 1u32;
            }
        }
    }
}

/// A library call that fails: a copy between buffers of different lengths, refused by the
/// runtime after `bump` was started.
fn copy_all<M>(
    stream: &gpu_pipeline::TypedStream<'_, M>,
    src: &DeviceBuffer<f32>,
    dst: &mut DeviceBuffer<f32>,
) -> Result<()> {
    stream.copy_dtod(src, dst)
}

gpu_pipeline! {
    /// As `Bounded`, with a failing `call` in place of the loop.
    pipeline Calls {
        streams { main, other }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = crate::cpu::add_scalar;
        }
        params { y: &mut DeviceBuffer<f32>, pair: &DeviceBuffer<f32>, r: &mut DeviceBuffer<f32> }
        stage bump on other { launch k::add_scalar(1u32, 1.0f32, y) grid 1u32 block 1u32; }
        stage fail on main { call copy_all(pair, r) reads(pair) writes(r); }
    }
}

gpu_pipeline! {
    /// A `do ... while` whose body runs before its first test.
    pipeline Repeat {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]) cpu = crate::cpu::add_scalar;
        }
        params { y: &mut DeviceBuffer<f32>, r: &mut DeviceBuffer<f32> }
        stage count on main {
            do {
                launch k::add_scalar(1u32, 1.0f32, y) grid 1u32 block 1u32;
                launch k::add_scalar(1u32, -1.0f32, r) grid 1u32 block 1u32;
            } while r > 0.5f32 max 3u32;
        }
    }
}

fn buffer(stream: &Stream, values: &[f32]) -> Result<DeviceBuffer<f32>> {
    let buffer = DeviceBuffer::from_slice(stream, values)?;
    stream.synchronize()?;
    Ok(buffer)
}

/// A loop that reaches its maximum fails the step; reading `y` right after, and the next
/// step, see `bump`'s write in order.
fn a_loop_at_its_maximum_leaves_nothing_running(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let (mut y, mut r) = (buffer(&stream, &[5.0])?, buffer(&stream, &[100.0])?);
    let mut pipeline = Bounded::new(ctx)?;
    let outcome = pipeline
        .run(BoundedParams {
            limit: 3,
            y: &mut y,
            r: &mut r,
        })
        .and_then(|run| run.wait());
    match outcome {
        Err(Error::Stage { source, .. }) => assert!(
            matches!(
                *source,
                Error::IterationLimit {
                    max_iterations: 3,
                    ..
                }
            ),
            "{source}"
        ),
        other => panic!("expected the iteration limit, got {other:?}"),
    }
    // No synchronize here: the failed `run` waited for `bump`.
    assert_eq!(y.to_vec(&stream)?, [6.0], "bump ran once");
    assert_eq!(r.to_vec(&stream)?, [97.0], "three iterations ran");
    pipeline
        .run(BoundedParams {
            limit: 1000,
            y: &mut y,
            r: &mut r,
        })?
        .wait()?;
    assert_eq!(y.to_vec(&stream)?, [7.0]);
    assert_eq!(r.to_vec(&stream)?, [0.0]);
    Ok(())
}

/// The same for a failing `call`, and for a run of several steps that fails in its first.
fn a_failing_call_leaves_nothing_running(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let (mut r, pair) = (buffer(&stream, &[0.0])?, buffer(&stream, &[1.0, 2.0])?);
    let mut pipeline = Calls::new(ctx)?;
    for steps in [1, 3] {
        let mut y = buffer(&stream, &[5.0])?;
        let outcome = pipeline
            .run_steps(
                CallsParams {
                    y: &mut y,
                    pair: &pair,
                    r: &mut r,
                },
                steps,
            )
            .and_then(|run| run.wait());
        match outcome {
            Err(Error::Stage { stage, .. }) => assert_eq!(stage, "fail"),
            other => panic!("expected the call's failure, got {other:?}"),
        }
        // The first step failed: `bump` ran once, and no later step was enqueued.
        assert_eq!(y.to_vec(&stream)?, [6.0], "{steps} step(s)");
    }
    Ok(())
}

/// A condition buffer with no element to test is refused before the step runs anything,
/// eager and captured: the `do ... while` body does not run first.
fn an_empty_condition_buffer_is_refused_first(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut pipeline = Repeat::new(ctx)?;
    for captured in [false, true] {
        let mut y = buffer(&stream, &[5.0])?;
        let mut r = DeviceBuffer::<f32>::zeros(&stream, 0)?;
        stream.synchronize()?;
        let params = RepeatParams {
            y: &mut y,
            r: &mut r,
        };
        let outcome = if captured {
            pipeline.capture(params).map(drop)
        } else {
            pipeline.run(params).and_then(|run| run.wait())
        };
        match outcome {
            Err(Error::Stage { stage, source, .. }) => {
                assert_eq!(stage, "count");
                assert!(source.to_string().contains("`r > 0.5f32`"), "{source}");
                assert!(source.to_string().contains("empty"), "{source}");
            }
            other => panic!("expected the empty buffer's refusal, got {other:?}"),
        }
        assert_eq!(y.to_vec(&stream)?, [5.0], "the body did not run");
    }
    Ok(())
}

tests::on_both_backends_race_free!(
    a_loop_at_its_maximum_leaves_nothing_running,
    a_failing_call_leaves_nothing_running,
    an_empty_condition_buffer_is_refused_first,
);
