//! What the macro's checks of issue 13 protect at run time, run for real:
//!
//! - a flag `wait` that a write ordered before it satisfies lets the step finish, eagerly and
//!   in every replay of a captured graph (the wait the macro now rejects, satisfied only by a
//!   later stage, hangs the stream for ever);
//! - a setter of a scalar that feeds more than kernel nodes (a `fill` value, a flag value, a
//!   host closure, a called function, a scratch buffer's length) is seen by the next replay.
//!
//! On the checked host backend (zero races) and, ignored here, on the GPU.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use gpu_pipeline::{
    Context, DeviceBuffer, FlagCell, PinnedBuffer, Result, Stream, TypedStream, gpu_pipeline,
};

mod host {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v += value;
        }
    }

    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }
}

gpu_pipeline! {
    /// A producer signals a consumer through a flag, after the data it consumes: the write
    /// is ordered before the wait (a read-after-write of `partial` and of `done`), so the wait
    /// is satisfied in every step.
    pipeline Handoff {
        streams { produce, consume(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) host = host::saxpy;
        }
        params {
            n: u32,
            round: u32,
            x: &DeviceBuffer<f32>,
            partial: &mut DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
            done: &mut FlagCell,
        }
        stage part on produce {
            launch k::saxpy(n, 1.0f32, x, partial) grid n.div_ceil(128) block 128;
            write done = round;
        }
        stage fin on consume {
            wait done >= round;
            copy partial -> out;
        }
    }
}

/// Runs `f` on another thread and fails the test if it has not returned within `seconds`:
/// a hung stream would otherwise hang the test binary.
fn within<T: Send + 'static>(seconds: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = send.send(f());
    });
    match receive.recv_timeout(Duration::from_secs(seconds)) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it returns"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("the step did not finish within {seconds} s: a flag wait was never satisfied")
        }
    }
}

fn handoff_terminates(ctx: &Context) {
    let n = 512_u32;
    let stream = Stream::non_blocking(ctx).unwrap();
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
    let mut partial = DeviceBuffer::<f32>::zeros(&stream, n as usize).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, n as usize).unwrap();
    let mut done = FlagCell::<u32>::new(ctx, 0).unwrap();
    stream.synchronize().unwrap();

    let mut pipeline = Handoff::new(ctx).unwrap();
    pipeline
        .run(HandoffParams {
            n,
            round: 1,
            x: &x,
            partial: &mut partial,
            out: &mut out,
            done: &mut done,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), xs);
    assert_eq!(done.load(), 1);

    // Replays, each with a new round: `set_round` re-captures, since `round` is baked into
    // the flag nodes.
    {
        let mut graph = pipeline
            .capture(HandoffParams {
                n,
                round: 2,
                x: &x,
                partial: &mut partial,
                out: &mut out,
                done: &mut done,
            })
            .unwrap();
        for round in 2..5 {
            graph.set_round(round).unwrap();
            graph.launch().unwrap();
        }
        graph.synchronize().unwrap();
    }
    // One eager step and three replays, each adding `x` once.
    let want: Vec<f32> = xs.iter().map(|x| 4.0 * x).collect();
    assert_eq!(out.to_vec().unwrap(), want);
    assert_eq!(done.load(), 4);
}

#[test]
fn host_a_flag_written_before_its_wait_lets_every_step_finish() {
    let ctx = Context::host_checked();
    let checked = ctx.clone();
    within(60, move || handoff_terminates(&ctx));
    assert!(checked.races().is_empty(), "{:?}", checked.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_flag_written_before_its_wait_lets_every_step_finish() {
    within(60, || handoff_terminates(&Context::cuda(0).unwrap()));
}

/// What the host closure of `Fresh` saw last.
static LAST_ROUND: AtomicU32 = AtomicU32::new(0);

/// A library call that takes a scalar: sets every word of `marks` to the bits of `value`.
fn mark(
    stream: &TypedStream<'_, FreshMain>,
    value: f32,
    marks: &mut DeviceBuffer<f32>,
) -> Result<()> {
    stream.memset_u32(marks, value.to_bits())
}

gpu_pipeline! {
    /// Every place a scalar can reach besides a kernel's arguments: a `fill` value (`v`), a
    /// called function's argument (`v`), a flag value and a host closure (`round`), and a
    /// scratch buffer's length (`n`, which the kernels read too).
    pipeline Fresh {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) host = host::add_scalar;
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) host = host::saxpy;
        }
        params {
            n: u32,
            v: f32,
            round: u32,
            y: &mut DeviceBuffer<f32>,
            marks: &mut DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
            flag: &mut FlagCell,
        }
        scratch { tmp: DeviceBuffer<f32> = n as usize }
        stage build on main {
            fill tmp = v;
            launch k::add_scalar(n, 1.0f32, tmp) grid n.div_ceil(128) block 128;
            fill y = 0.0f32;
            launch k::saxpy(n, 1.0f32, tmp, y) grid n.div_ceil(128) block 128;
            call mark(v, marks) writes(marks);
        }
        stage report on side {
            copy y -> out;
            write flag = round;
            host move || LAST_ROUND.store(round, Ordering::SeqCst) reads(out);
        }
    }
}

fn setters_reach_every_node(ctx: &Context) {
    let capacity = 1024_usize;
    let stream = Stream::non_blocking(ctx).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&stream, capacity).unwrap();
    let mut marks = DeviceBuffer::<f32>::zeros(&stream, capacity).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, capacity).unwrap();
    let mut flag = FlagCell::<u32>::new(ctx, 0).unwrap();
    stream.synchronize().unwrap();
    LAST_ROUND.store(0, Ordering::SeqCst);

    let mut pipeline = Fresh::new(ctx).unwrap();
    {
        let mut graph = pipeline
            .capture(FreshParams {
                n: 256,
                v: 1.0,
                round: 1,
                y: &mut y,
                marks: &mut marks,
                out: &mut out,
                flag: &mut flag,
            })
            .unwrap();
        graph.launch().unwrap();
        graph.synchronize().unwrap();
        // The replay after each setter sees the new value everywhere.
        graph.set_v(4.0).unwrap();
        graph.set_round(7).unwrap();
        graph.set_n(1000).unwrap();
        graph.launch().unwrap();
        graph.synchronize().unwrap();
    }
    let out = out.to_vec().unwrap();
    assert!(
        out[..1000].iter().all(|&y| y == 5.0),
        "fill value and length: {:?}",
        &out[..4]
    );
    assert!(
        out[1000..].iter().all(|&y| y == 0.0),
        "only `n` elements are written"
    );
    let marks = marks.to_vec(&stream).unwrap();
    assert!(
        marks.iter().all(|&m| m == 4.0),
        "the called function's argument"
    );
    assert_eq!(flag.load(), 7, "the flag value");
    assert_eq!(
        LAST_ROUND.load(Ordering::SeqCst),
        7,
        "the host closure's capture"
    );
}

#[test]
fn host_setters_reach_every_node_a_scalar_feeds() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ctx = Context::host_checked();
    setters_reach_every_node(&ctx);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_setters_reach_every_node_a_scalar_feeds() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    setters_reach_every_node(&Context::cuda(0).unwrap());
}

// The two `Fresh` tests share LAST_ROUND: run them one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

gpu_pipeline! {
    /// A token passed from iteration to iteration: iteration `i` waits for the value
    /// iteration `i - 1` wrote, then writes the next.
    pipeline Token {
        streams { main, work[4] }
        params { flag: &mut FlagCell }
        for i in 0..4 {
            stage pass on work[i] {
                wait flag == i as u32;
                write flag = (i + 1) as u32;
            }
        }
    }
}

fn token_passes(ctx: &Context) {
    let mut flag = FlagCell::<u32>::new(ctx, 0).unwrap();
    let mut pipeline = Token::new(ctx).unwrap();
    pipeline
        .run(TokenParams { flag: &mut flag })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(flag.load(), 4);
}

/// The token's chain compiles (it was refused as a wait only a later write satisfies) and
/// runs to the end.
#[test]
fn host_a_token_passed_between_iterations_runs() {
    let ctx = Context::host_checked();
    let checked = ctx.clone();
    within(60, move || token_passes(&ctx));
    assert!(checked.races().is_empty(), "{:?}", checked.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_token_passed_between_iterations_runs() {
    within(60, || token_passes(&Context::cuda(0).unwrap()));
}

gpu_pipeline! {
    /// A token passed between two stages of each iteration of a `for` over a param: `take`
    /// waits for what the previous iteration's `give` wrote.
    pipeline SplitToken {
        streams { main, work[2] }
        params { rounds: usize, flag: &mut FlagCell }
        for i in 0..rounds {
            stage take on work[i % 2] {
                wait flag == i as u32;
            }
            stage give on main {
                write flag = (i + 1) as u32;
            }
        }
    }
}

fn split_token_passes(ctx: &Context) {
    let mut flag = FlagCell::<u32>::new(ctx, 0).unwrap();
    let mut pipeline = SplitToken::new(ctx).unwrap();
    pipeline
        .run(SplitTokenParams {
            rounds: 5,
            flag: &mut flag,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(flag.load(), 5);
}

/// The chain compiles (it was refused as a wait only a later write satisfies) and runs to
/// the end.
#[test]
fn host_a_token_passed_between_stages_over_a_param_runs() {
    let ctx = Context::host_checked();
    let checked = ctx.clone();
    within(60, move || split_token_passes(&ctx));
    assert!(checked.races().is_empty(), "{:?}", checked.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_token_passed_between_stages_over_a_param_runs() {
    within(60, || split_token_passes(&Context::cuda(0).unwrap()));
}

gpu_pipeline! {
    /// A token passed between iterations over a scratch flag, reset at the end of the step: a
    /// scratch flag keeps what a step leaves, so without the reset the second step's first
    /// iteration would wait for 0 with 4 in the flag.
    pipeline ScratchToken {
        streams { main, work[4] }
        scratch { token: FlagCell }
        for i in 0..4 {
            stage pass on work[i] {
                wait token == i as u32;
                write token = (i + 1) as u32;
            }
        }
        stage reset on main { write token = 0; }
    }
}

fn scratch_token_passes_every_step(ctx: &Context) {
    let mut pipeline = ScratchToken::new(ctx).unwrap();
    for _ in 0..3 {
        pipeline.run(ScratchTokenParams {}).unwrap().wait().unwrap();
    }
}

/// The chain, reset at the end of the step, runs step after step (without the reset it was
/// accepted and hung at the second step; now that is a compile error).
#[test]
fn host_a_scratch_token_reset_at_the_end_runs_every_step() {
    let ctx = Context::host_checked();
    let checked = ctx.clone();
    within(60, move || scratch_token_passes_every_step(&ctx));
    assert!(checked.races().is_empty(), "{:?}", checked.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_scratch_token_reset_at_the_end_runs_every_step() {
    within(60, || {
        scratch_token_passes_every_step(&Context::cuda(0).unwrap())
    });
}
