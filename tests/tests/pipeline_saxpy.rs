//! A generated pipeline end to end: two streams, a read-after-write across them, a copy back
//! to pinned memory, eager runs and a captured graph whose scalar is updated in place.
//! Results are checked against a sequential CPU reference on fresh pseudo-random data.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

/// Host implementations of the test kernels (plain Rust over slices).
mod host {
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        for v in &mut data[..n as usize] {
            *v += value;
        }
    }
}

gpu_pipeline! {
    /// `y += a * x`, then `y += bias` on the same stream, then `y` copied back on another.
    pub pipeline Saxpy {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) host = host::saxpy;
            fn add_scalar(n: u32, value: f32, data: &mut [f32]) host = host::add_scalar;
        }
        params {
            n: u32,
            a: f32,
            bias: f32,
            x: &DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        stage axpy on compute {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
            launch k::add_scalar(n, bias, y) grid n.div_ceil(256) block 256;
        }
        stage download on copy {
            copy y -> out;
        }
    }
}

/// A small xorshift so every run checks fresh data without a dependency.
fn random_floats(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
}

fn reference(x: &[f32], y: &[f32], a: f32, bias: f32) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| y + a * x + bias).collect()
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "element {i}: got {g}, want {w}"
        );
    }
}

fn eager_and_captured_runs_match_the_reference(ctx: &Context) {
    let n = 10_000_u32;
    let stream = Stream::non_blocking(ctx).unwrap();
    let xs = random_floats(seed(), n as usize);
    let ys = random_floats(seed() ^ 0x9e37, n as usize);
    let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &ys).unwrap();
    let mut out = PinnedBuffer::from_slice(ctx, &vec![f32::NAN; n as usize]).unwrap();

    let mut pipeline = Saxpy::new(ctx).unwrap();
    assert_eq!(Saxpy::STAGES, ["axpy", "download"]);
    assert!(
        Saxpy::DOT.contains("axpy") && Saxpy::DOT.contains("download"),
        "{}",
        Saxpy::DOT
    );

    // One eager step.
    pipeline
        .run(SaxpyParams {
            n,
            a: 2.0,
            bias: 0.5,
            x: &x,
            y: &mut y,
            out: &mut out,
        })
        .unwrap()
        .wait()
        .unwrap();
    let mut want = reference(&xs, &ys, 2.0, 0.5);
    assert_close(&out.to_vec().unwrap(), &want);

    // Captured once, replayed three times, then `a` changed in place and replayed twice.
    {
        let mut graph = pipeline
            .capture(SaxpyParams {
                n,
                a: 2.0,
                bias: 0.5,
                x: &x,
                y: &mut y,
                out: &mut out,
            })
            .unwrap();
        for _ in 0..3 {
            graph.launch().unwrap();
            want = reference(&xs, &want, 2.0, 0.5);
        }
        graph.set_a(-1.0).unwrap();
        for _ in 0..2 {
            graph.launch().unwrap();
            want = reference(&xs, &want, -1.0, 0.5);
        }
        // Setters apply together at the next launch. A value the kernels refuse (an empty
        // grid) fails that launch, naming the pipeline, and stays pending until replaced;
        // the launch that fails enqueues nothing.
        graph.set_a(3.0).unwrap();
        graph.set_n(0).unwrap();
        let e = graph.launch().unwrap_err();
        assert!(e.to_string().contains("Saxpy"), "{e}");
        assert!(
            graph.apply_updates().is_err(),
            "the bad value is still pending"
        );
        graph.set_n(n).unwrap();
        graph.launch().unwrap();
        want = reference(&xs, &want, 3.0, 0.5);
        graph.synchronize().unwrap();
    }
    assert_close(&out.to_vec().unwrap(), &want);
}

/// A profiled step reports every stage, in enqueue order, with sane times, and exports a
/// Chrome trace with one thread per stream.
fn a_profiled_step_times_each_stage(ctx: &Context) {
    let n = 4096_u32;
    let stream = Stream::non_blocking(ctx).unwrap();
    let xs = random_floats(seed(), n as usize);
    let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &vec![0.0; n as usize]).unwrap();
    let mut out = PinnedBuffer::zeros(ctx, n as usize).unwrap();
    let mut pipeline = Saxpy::new(ctx).unwrap();
    let profile = pipeline
        .profile(SaxpyParams {
            n,
            a: 1.0,
            bias: 0.0,
            x: &x,
            y: &mut y,
            out: &mut out,
        })
        .unwrap();
    let names: Vec<_> = profile.stages.iter().map(|s| (s.stage, s.stream)).collect();
    assert_eq!(names, [("axpy", "compute"), ("download", "copy")]);
    for s in &profile.stages {
        assert!(s.start_ms >= 0.0 && s.end_ms >= s.start_ms, "{profile}");
    }
    // `download` waits for `axpy`.
    assert!(
        profile.stages[1].start_ms >= profile.stages[0].end_ms - 1e-3,
        "{profile}"
    );
    let trace = profile.to_chrome_trace();
    assert!(
        trace.contains(r#""name":"axpy""#) && trace.contains(r#""args":{"name":"stream copy"}"#),
        "{trace}"
    );
    // The profiled step computed `y = 0 + 1 * x + 0` and copied it out.
    assert_close(&out.to_vec().unwrap(), &xs);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_profiled_step_times_each_stage() {
    a_profiled_step_times_each_stage(&Context::cuda(0).unwrap());
}

#[test]
fn host_a_profiled_step_times_each_stage() {
    let ctx = Context::host_checked();
    a_profiled_step_times_each_stage(&ctx);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_eager_and_captured_runs_match_the_reference() {
    eager_and_captured_runs_match_the_reference(&Context::cuda(0).unwrap());
}

#[test]
fn host_eager_and_captured_runs_match_the_reference() {
    let ctx = Context::host_checked();
    eager_and_captured_runs_match_the_reference(&ctx);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}
