//! Every statement kind of the DSL, run for real: a scratch buffer sized by a param, `fill`,
//! `launch`, `copy` both ways, `call` with the stage's typed stream, a host closure, and a
//! flag `write` that another stream `wait`s on. The result is checked against a sequential
//! reference, eagerly and as replays of a captured graph, on the checked host backend (zero
//! races) and on the GPU.

use std::sync::atomic::{AtomicU32, Ordering};

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

/// A "library" function that enqueues on the stage's stream: `dst = src`.
fn library_copy(
    stream: &TypedStream<'_, StepsWork>,
    src: &DeviceBuffer<f32>,
    dst: &mut DeviceBuffer<f32>,
) -> Result<()> {
    stream.copy_dtod(src, dst)
}

gpu_pipeline! {
    /// `tmp = 0; tmp += 1.5; tmp = input; tmp += 2 * input` on `work`, then `output = tmp`
    /// via a library call, signalled to `io`, which waits for the flag and downloads.
    pipeline Steps {
        streams { work, io(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) host = host::add_scalar;
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) host = host::saxpy;
        }
        params {
            n: u32,
            round: u32,
            input: &PinnedBuffer<f32>,
            device_in: &mut DeviceBuffer<f32>,
            output: &mut DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
            ready: &mut FlagCell<u32>,
        }
        scratch { tmp: DeviceBuffer<f32> = n as usize }
        stage upload on work {
            copy input -> device_in;
            fill tmp = 0.0f32;
            launch k::add_scalar(n, 1.5f32, tmp) grid n.div_ceil(128) block 128;
            launch k::saxpy(n, 2.0f32, device_in, tmp) grid n.div_ceil(128) block 128;
        }
        stage publish on work {
            call library_copy(tmp, output) reads(tmp) writes(output);
            write ready = round;
        }
        stage download on io after publish {
            wait ready >= round;
            copy output -> out;
            // A host closure replays with the graph, so it is `'static`: scalars and statics.
            host move || { HOST_RUNS.fetch_add(round, Ordering::SeqCst); } reads(out);
        }
    }
}

/// What the host closure adds up: its `round` per run.
static HOST_RUNS: AtomicU32 = AtomicU32::new(0);

fn every_statement_kind_matches_the_reference(ctx: &Context) {
    let n = 1000_u32;
    let stream = Stream::non_blocking(ctx).unwrap();
    let xs: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25 - 3.0).collect();
    let want: Vec<f32> = xs.iter().map(|x| 1.5 + 2.0 * x).collect();
    let input = PinnedBuffer::from_slice(ctx, &xs).unwrap();
    let mut device_in = DeviceBuffer::<f32>::zeros(&stream, n as usize).unwrap();
    let mut output = DeviceBuffer::<f32>::zeros(&stream, n as usize).unwrap();
    let mut out = PinnedBuffer::from_slice(ctx, &vec![f32::NAN; n as usize]).unwrap();
    let mut ready = FlagCell::<u32>::new(ctx, 0).unwrap();
    HOST_RUNS.store(0, Ordering::SeqCst);
    stream.synchronize().unwrap();

    let mut pipeline = Steps::new(ctx).unwrap();
    pipeline
        .run(StepsParams {
            n,
            round: 1,
            input: &input,
            device_in: &mut device_in,
            output: &mut output,
            out: &mut out,
            ready: &mut ready,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), want);
    assert_eq!((ready.load(), HOST_RUNS.load(Ordering::SeqCst)), (1, 1));

    // Captured: the scratch buffer is reused, the flag round is baked into the graph.
    {
        let mut graph = pipeline
            .capture(StepsParams {
                n,
                round: 2,
                input: &input,
                device_in: &mut device_in,
                output: &mut output,
                out: &mut out,
                ready: &mut ready,
            })
            .unwrap();
        for _ in 0..3 {
            graph.launch().unwrap();
        }
        graph.synchronize().unwrap();
    }
    assert_eq!(out.to_vec().unwrap(), want);
    // Three replays of round 2 after one eager round 1.
    assert_eq!(
        (ready.load(), HOST_RUNS.load(Ordering::SeqCst)),
        (2, 1 + 3 * 2)
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_every_statement_kind_matches_the_reference() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    every_statement_kind_matches_the_reference(&Context::cuda(0).unwrap());
}

// The two tests share HOST_RUNS: run them one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn host_every_statement_kind_matches_the_reference() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ctx = Context::host_checked();
    every_statement_kind_matches_the_reference(&ctx);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

gpu_pipeline! {
    /// `tmp` written only by a `for` over `rounds` (`fill`, then `+= 1` per round), then
    /// copied out: with `rounds = 0` nothing writes it before the copy.
    pipeline FilledInALoop {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = host::add_scalar;
        }
        params { rounds: usize, out: &mut DeviceBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = 4 }
        for i in 0..rounds {
            stage round on main {
                fill tmp = 0.0;
                launch k::add_scalar(4, (i + 1) as f32, tmp) grid 1u32 block 4u32;
            }
        }
        stage out on main { copy tmp -> out; }
    }
}

/// A scratch buffer that only a `for` over a param writes before its read: it runs when the
/// loop runs (eagerly and captured), and with no iteration the step is refused before
/// anything is enqueued, naming the buffer, the stage and the loop (it read undefined
/// memory before).
fn a_scratch_read_only_a_loop_of_no_iteration_writes_is_refused(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut out = DeviceBuffer::<f32>::zeros(&stream, 4)?;
    stream.synchronize()?;
    let mut pipeline = FilledInALoop::new(ctx)?;
    pipeline
        .run(FilledInALoopParams {
            rounds: 3,
            out: &mut out,
        })?
        .wait()?;
    assert_eq!(out.to_vec(&stream)?, [3.0; 4]);
    let err = pipeline
        .run(FilledInALoopParams {
            rounds: 0,
            out: &mut out,
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("stage `out` reads elements 0..4 of scratch buffer `tmp`")
            && err.contains("ran no iteration")
            && err.contains("`fill tmp = 0.0;`"),
        "{err}"
    );
    let err = pipeline
        .capture(FilledInALoopParams {
            rounds: 0,
            out: &mut out,
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("ran no iteration"), "{err}");
    let mut graph = pipeline.capture(FilledInALoopParams {
        rounds: 2,
        out: &mut out,
    })?;
    graph.launch()?;
    graph.synchronize()?;
    drop(graph);
    assert_eq!(out.to_vec(&stream)?, [2.0; 4]);
    Ok(())
}

gpu_pipeline! {
    /// Scratch written in parts. `halves`: `w1` (a `for` over `a`) writes `tmp[0..2]` on
    /// `main`, `w2` (over `b`) `tmp[2..4]` on `other`; `r1` reads the first half, `r0` (a
    /// `for` over `c`) and then `r2` the second. (A fill of `tmp[0..1]` then a read of
    /// `tmp[2..4]`, all constants, is a compile error: ui-test
    /// `ordering/scratch_part_never_written`.)
    pipeline Parts {
        streams { main, other }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = host::add_scalar;
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = host::saxpy;
        }
        params {
            a: usize,
            b: usize,
            c: usize,
            out1: &mut DeviceBuffer<f32>,
            out2: &mut DeviceBuffer<f32>,
        }
        scratch { tmp: DeviceBuffer<f32> = 4 }
        step halves {
            for i in 0..a { stage w1 on main { fill tmp[0..2] = 1.0; } }
            stage r1 on main { launch k::saxpy(2, 1.0, tmp[0..2], out1[0..2]) grid 1u32 block 2u32; }
            for j in 0..b { stage w2 on other { fill tmp[2..4] = 2.0; } }
            for m in 0..c {
                stage r0 on other { launch k::saxpy(2, 1.0, tmp[2..4], out2[2..4]) grid 1u32 block 2u32; }
            }
            stage r2 on other { launch k::saxpy(2, 1.0, tmp[2..4], out2[0..2]) grid 1u32 block 2u32; }
        }
    }
}

/// The cases the compile-time rule lets through, each refused when the step is planned,
/// naming the stage and the elements nothing wrote: a read after a loop that reads (both
/// loops empty), writes in parts where one loop ran and the other did not. With every
/// element written, the step runs.
fn scratch_reads_of_elements_nothing_wrote_are_refused(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut out1 = DeviceBuffer::<f32>::zeros(&stream, 4)?;
    let mut out2 = DeviceBuffer::<f32>::zeros(&stream, 4)?;
    stream.synchronize()?;
    let mut pipeline = Parts::new(ctx)?;
    let mut halves = |pipeline: &mut Parts, (a, b, c): (usize, usize, usize)| {
        let params = PartsParams {
            a,
            b,
            c,
            out1: &mut out1,
            out2: &mut out2,
        };
        let run = pipeline.run_halves(params).and_then(|run| run.wait());
        run.map_err(|e| e.to_string())
    };
    halves(&mut pipeline, (1, 1, 2)).unwrap();
    for (counts, stage, elements) in [
        ((0, 1, 0), "r1", "0..2"),
        ((1, 0, 0), "r2", "2..4"),
        ((1, 0, 1), "r0[0]", "2..4"),
    ] {
        let err = halves(&mut pipeline, counts).unwrap_err();
        assert!(
            err.contains(&format!(
                "stage `{stage}` reads from elements {elements} of scratch buffer `tmp`"
            )),
            "{counts:?}: {err}"
        );
    }
    Ok(())
}

/// A library call that copies the first `n` elements of `src` into `dst`.
fn copy_prefix(
    stream: &TypedStream<'_, PartlyWrittenMain>,
    src: &DeviceBuffer<f32>,
    dst: &mut DeviceBuffer<f32>,
    n: usize,
) -> Result<()> {
    stream.copy_dtod(&src.slice(..n)?, &mut dst.slice_mut(..n)?)
}

gpu_pipeline! {
    /// Correct programs that read less of a scratch buffer than they name: a kernel given
    /// the whole buffer indexes below its bound `n`, a condition reads the first element, a
    /// `call` declaring `reads(tmp)` copies a prefix. Only `tmp[0..n]` and `res[0..1]` are
    /// ever written.
    pipeline PartlyWritten {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = host::add_scalar;
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = host::saxpy;
        }
        params { n: u32, out: &mut DeviceBuffer<f32>, twice: &mut DeviceBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = 8, res: DeviceBuffer<f32> = 2 }
        stage s on main {
            fill tmp[0..n as usize] = 1.0;
            launch k::saxpy(n, 1.0, tmp, out) grid 1u32 block 8u32;
            fill res[0..1] = 0.0;
            do {
                launch k::add_scalar(1, 1.0, res[0..1]) grid 1u32 block 1u32;
            } while res < 3.0 max 10;
            if res < 5.0 {
                launch k::saxpy(n, 1.0, tmp, twice) grid 1u32 block 8u32;
            }
            call copy_prefix(tmp, twice, n as usize) reads(tmp) writes(twice);
        }
    }
}

gpu_pipeline! {
    /// `tmp[0..half]` written, then `tmp[half..4]` in a body: `maybe` (an `if` without
    /// `else`) leaves it unwritten when the condition fails; `either` writes it in both
    /// bodies. (With constant ranges the compiler refuses `maybe`; over `half` the step's plan
    /// does.)
    pipeline HalfInABody {
        streams { main }
        params { flag: &DeviceBuffer<u32>, half: usize, out: &mut DeviceBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = 4 }
        step maybe {
            stage m on main {
                fill tmp[0..half] = 1.0;
                if flag > 0u32 {
                    fill tmp[half..4] = 2.0;
                }
                copy tmp -> out;
            }
        }
        step either {
            stage e on main {
                fill tmp[0..2] = 1.0;
                if flag > 0u32 {
                    fill tmp[2..4] = 2.0;
                } else {
                    fill tmp[2..4] = 3.0;
                }
                copy tmp -> out;
            }
        }
    }
}

/// A write inside an `if` without `else` does not count after it, element by element (the
/// compile-time rule, per buffer, is met by the write before the `if`): the step is refused
/// naming the elements only the body writes; an `if`/`else` writing them in both bodies runs,
/// with either value. (Both ran before, reading what the last step left.)
fn scratch_written_only_in_a_body_that_may_not_run_is_refused(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut out = DeviceBuffer::<f32>::zeros(&stream, 4)?;
    stream.synchronize()?;
    let mut pipeline = HalfInABody::new(ctx)?;
    let flags = [1u32, 0].map(|f| DeviceBuffer::from_slice(&stream, &[f]));
    let [Ok(on), Ok(off)] = &flags else {
        panic!("uploads failed");
    };
    for flag in [on, off] {
        let err = pipeline
            .run_maybe(HalfInABodyParams {
                flag,
                half: 2,
                out: &mut out,
            })
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("stage `m` reads elements 2..4 of scratch buffer `tmp`")
                && err.contains("a control statement before it writes them on some of its runs"),
            "{err}"
        );
    }
    for (flag, value) in [(on, 2.0), (off, 3.0)] {
        pipeline
            .run_either(HalfInABodyParams {
                flag,
                half: 2,
                out: &mut out,
            })?
            .wait()?;
        assert_eq!(out.to_vec(&stream)?, [1.0, 1.0, value, value]);
    }
    Ok(())
}

gpu_pipeline! {
    /// `do ... while`s on scratch conditions. `nested`: inside an `if`, its body writes the
    /// condition (correct). `late`: its body writes `res[k]`, its test reads `res[0]`, and a
    /// fill after it writes all of `res` (the first test reads `res[0]` unwritten when
    /// `k = 1`). `swapped`: a `while` whose body swaps `a` and `b` may run no iteration, so
    /// `b` is then only partly written (`b[0..k + 1]`: with a constant range the compiler
    /// refuses it; over `k` the step's plan does).
    pipeline LoopsOnScratch {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = host::add_scalar;
        }
        params { flag: &DeviceBuffer<u32>, k: usize, out: &mut DeviceBuffer<f32> }
        scratch {
            res: DeviceBuffer<f32> = 2,
            a: DeviceBuffer<f32> = 4,
            b: DeviceBuffer<f32> = 4,
            c: DeviceBuffer<u32> = 1,
        }
        step nested {
            stage n on main {
                if flag > 0u32 {
                    do {
                        fill res = 5.0;
                    } while res < 3.0 max 10;
                    copy res -> out[0..2];
                }
            }
        }
        step late {
            stage l on main {
                do {
                    fill res[k..k + 1] = 5.0;
                } while res < 3.0 max 10;
                fill res = 0.0;
                copy res -> out[0..2];
            }
        }
        step swapped {
            stage w on main {
                fill a = 1.0;
                fill b[0..k + 1] = 0.0;
                fill c = 0u32;
                while c > 0u32 max 10 {
                    launch k::add_scalar(4, 1.0, a) grid 1u32 block 4u32;
                    fill c = 0u32;
                    swap(a, b);
                }
                copy b -> out;
            }
        }
    }
}

/// A `do ... while`'s condition is judged against what its body wrote, wherever the loop
/// sits (inside an `if` it was judged after the `if`, and the correct `nested` was refused),
/// and before anything after the loop (a later fill hid `late`'s unwritten first test); a
/// `while` that may run no iteration does not count its swap as writing both buffers.
fn conditions_and_swaps_of_loops_are_judged_where_they_run(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut out = DeviceBuffer::<f32>::zeros(&stream, 4)?;
    let on = DeviceBuffer::from_slice(&stream, &[1u32])?;
    stream.synchronize()?;
    let mut pipeline = LoopsOnScratch::new(ctx)?;
    fn params<'a>(
        on: &'a DeviceBuffer<u32>,
        out: &'a mut DeviceBuffer<f32>,
        k: usize,
    ) -> LoopsOnScratchParams<'a> {
        LoopsOnScratchParams { flag: on, k, out }
    }
    pipeline.run_nested(params(&on, &mut out, 0))?.wait()?;
    assert_eq!(out.to_vec(&stream)?[..2], [5.0, 5.0]);
    pipeline.run_late(params(&on, &mut out, 0))?.wait()?;
    let refusal = |result: Result<()>| result.unwrap_err().to_string();
    let err = refusal(pipeline.run_late(params(&on, &mut out, 1)).map(|_| ()));
    assert!(
        err.contains("stage `l` tests element 0 (a condition) of scratch buffer `res`"),
        "{err}"
    );
    let err = refusal(pipeline.run_swapped(params(&on, &mut out, 0)).map(|_| ()));
    assert!(
        err.contains("stage `w` reads elements 1..4 of scratch buffer `b`"),
        "{err}"
    );
    Ok(())
}

/// `PartlyWritten` runs: what it reads of its scratch buffers was written, though each
/// statement names more (these were refused by the first element-wise check).
fn scratch_read_in_part_where_written_runs(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut out = DeviceBuffer::<f32>::zeros(&stream, 8)?;
    let mut twice = DeviceBuffer::<f32>::zeros(&stream, 8)?;
    stream.synchronize()?;
    let mut pipeline = PartlyWritten::new(ctx)?;
    pipeline
        .run(PartlyWrittenParams {
            n: 4,
            out: &mut out,
            twice: &mut twice,
        })?
        .wait()?;
    assert_eq!(
        out.to_vec(&stream)?,
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(twice.to_vec(&stream)?[..4], [1.0; 4]);
    Ok(())
}

tests::on_both_backends_race_free!(
    a_scratch_read_only_a_loop_of_no_iteration_writes_is_refused,
    scratch_reads_of_elements_nothing_wrote_are_refused,
    scratch_read_in_part_where_written_runs,
    scratch_written_only_in_a_body_that_may_not_run_is_refused,
    conditions_and_swaps_of_loops_are_judged_where_they_run,
);
