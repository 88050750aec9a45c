//! A loop swap (`swap(x, y);` at the end of a loop body) is checked before a step enqueues or
//! builds anything: the launches of the body in the swapped arrangement against their
//! kernels' bounds, and the two buffers for one length (the body runs on both, and an odd
//! count copies the second into the first). A refused step leaves every buffer as it was.
//! On the checked CPU backend and, ignored without a GPU, on CUDA.

use gpu_pipeline::{Context, DeviceBuffer, Error, Result, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

gpu_pipeline! {
    /// Adds 1 to the first `n` elements of `x`, then of `y`, and so on, `r` times.
    pipeline PingPong {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = crate::cpu::add_scalar;
        }
        params { n: u32, r: &mut DeviceBuffer<f32>, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage sweep on main {
            while r > 0.5f32 max 10u32 {
                launch k::add_scalar(n, 1.0f32, x) grid 1u32 block 32u32;
                launch k::add_scalar(1u32, -1.0f32, r) grid 1u32 block 1u32;
                swap(x, y);
            }
        }
    }
}

/// A step's outcome, with `x`, `y` and `r` after it.
type Outcome = (Result<()>, Vec<f32>, Vec<f32>, Vec<f32>);

/// Runs one step of `PingPong` (eager or captured and replayed) on `x` of 8 elements and `y`
/// of `y_len`, and returns its outcome with `x`, `y` and `r` after it.
fn step(ctx: &Context, n: u32, y_len: usize, captured: bool) -> Result<Outcome> {
    let stream = Stream::new(ctx)?;
    let mut pipeline = PingPong::new(ctx)?;
    let mut r = DeviceBuffer::from_slice(&stream, &[3.0f32])?;
    let mut x = DeviceBuffer::<f32>::zeros(&stream, 8)?;
    let mut y = DeviceBuffer::<f32>::zeros(&stream, y_len)?;
    stream.synchronize()?;
    let params = PingPongParams {
        n,
        r: &mut r,
        x: &mut x,
        y: &mut y,
    };
    let outcome = if captured {
        pipeline.capture(params).and_then(|mut graph| {
            graph.launch()?;
            graph.synchronize()
        })
    } else {
        pipeline.run(params).and_then(|run| run.wait())
    };
    Ok((
        outcome,
        x.to_vec(&stream)?,
        y.to_vec(&stream)?,
        r.to_vec(&stream)?,
    ))
}

/// `n` = 8 fits `x` (8 elements) but not `y` (4), which the swapped half of the iterations
/// passes in `x`'s place: refused before the first iteration runs.
fn a_swapped_arrangement_that_breaks_a_bound_is_refused_first(ctx: &Context) -> Result<()> {
    for captured in [false, true] {
        let (outcome, x, y, r) = step(ctx, 8, 4, captured)?;
        let error = outcome.expect_err("the swapped arrangement breaks the bound");
        assert!(error.kernel_bound().is_some(), "{error}");
        assert_eq!(
            (x, y, r),
            (vec![0.0; 8], vec![0.0; 4], vec![3.0]),
            "nothing ran"
        );
    }
    Ok(())
}

/// Buffers of 8 and 4 elements with `n` = 4 fit the kernel both ways, but cannot be swapped:
/// refused before anything runs, naming the swap.
fn a_swap_of_buffers_of_two_lengths_is_refused_first(ctx: &Context) -> Result<()> {
    for captured in [false, true] {
        let (outcome, x, y, r) = step(ctx, 4, 4, captured)?;
        match outcome {
            Err(Error::Stage { stage, source, .. }) => {
                assert_eq!(stage, "sweep");
                let message = source.to_string();
                assert!(message.contains("`swap(x, y)`"), "{message}");
                assert!(message.contains("8 and 4 elements"), "{message}");
            }
            other => panic!("expected the swap's refusal, got {other:?}"),
        }
        assert_eq!(
            (x, y, r),
            (vec![0.0; 8], vec![0.0; 4], vec![3.0]),
            "nothing ran"
        );
    }
    // The same step with buffers of one length runs: three iterations, on x, y and x again
    // (x's first four elements 2, y's 1); an odd count then copies the second buffer into
    // the first, as a ping-pong leaves its result under the first name.
    for captured in [false, true] {
        let (outcome, x, y, r) = step(ctx, 4, 8, captured)?;
        outcome?;
        let ones = [vec![1.0; 4], vec![0.0; 4]].concat();
        assert_eq!(
            (x, y, r),
            (ones.clone(), ones, vec![0.0]),
            "captured: {captured}"
        );
    }
    Ok(())
}

tests::on_both_backends_race_free!(
    a_swapped_arrangement_that_breaks_a_bound_is_refused_first,
    a_swap_of_buffers_of_two_lengths_is_refused_first,
);
