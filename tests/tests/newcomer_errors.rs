//! A newcomer's first time-step simulation on the CPU backend (1-D diffusion, CUDA C source
//! with a CPU twin) and the mistakes a first week brings: each error says what went wrong,
//! where (the pipeline, stage, kernel or buffer by the user's names), the cause, and what to do.

use gpu_pipeline::{Context, DeviceBuffer, Error, PinnedBuffer, Stream, gpu_pipeline};

/// The newcomer's CPU twin of `diffuse.cu`, with the classic bug: `i + 1` reaches `n` at the
/// last cell, where the CUDA kernel stops at `i + 1 < n`.
fn diffuse_off_by_one(n: u32, alpha: f32, src: &[f32], dst: &mut [f32]) {
    for i in 1..n as usize {
        dst[i] = src[i] + alpha * (src[i - 1] - 2.0 * src[i] + src[i + 1]);
    }
}

gpu_pipeline! {
    /// A host closure that logs each step, with the newcomer's bug: it reads past the end.
    pipeline Logged {
        streams { main }
        params { steps: usize }
        stage log on main {
            host move || {
                let seen = [0u32; 2];
                assert!(seen[steps] == 0, "step {steps} past the log");
            };
        }
    }
}

gpu_pipeline! {
    /// One explicit diffusion step from `a` into `b`, with `b` copied out.
    pipeline Heat {
        streams { compute, copy(non_blocking) }
        unsafe kernels k = cuda_c(include_str!("../cuda_source/diffuse.cu")) {
            fn diffuse(n: u32, alpha: f32, src: &[f32; n], dst: &mut [f32; n]) cpu = diffuse_off_by_one;
        }
        params { n: u32, alpha: f32, a: &mut DeviceBuffer<f32>, b: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage step on compute { launch k::diffuse(n, alpha, a, b) grid n.div_ceil(32) block 32; }
        stage save on copy { copy b -> out; }
    }
}

const N: usize = 64;

/// The buffers, made on `stream`: `b` is zeroed in `stream`'s order.
fn buffers(
    ctx: &Context,
    stream: &Stream,
) -> (DeviceBuffer<f32>, DeviceBuffer<f32>, PinnedBuffer<f32>) {
    let a = DeviceBuffer::from_slice(stream, &[1.0f32; N]).unwrap();
    let b = DeviceBuffer::<f32>::zeros(stream, N).unwrap();
    let out = PinnedBuffer::<f32>::zeros(ctx, N).unwrap();
    (a, b, out)
}

/// The error says the kernel's CPU twin panicked, in which stage and launch, why, and what to
/// fix; `Error::Step` names the stage (no "fault tracking is off": the CPU backend knows).
fn assert_names_the_panicking_launch(err: &Error) {
    assert!(
        matches!(
            err,
            Error::Step {
                pipeline: "Heat",
                stage: Some("step"),
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.report().to_string();
    for part in [
        "pipeline `Heat`",
        "`launch k::diffuse` of stage `step` on stream `Heat.compute` panicked",
        "index out of bounds",
        "the kernel's CPU implementation panicked",
    ] {
        assert!(message.contains(part), "missing {part:?} in: {message}");
    }
    assert!(!message.contains("fault tracking is off"), "{message}");
}

/// One step's params over the whole field.
fn params<'a>(
    a: &'a mut DeviceBuffer<f32>,
    b: &'a mut DeviceBuffer<f32>,
    out: &'a mut PinnedBuffer<f32>,
) -> HeatParams<'a> {
    HeatParams {
        n: N as u32,
        alpha: 0.1,
        a,
        b,
        out,
    }
}

#[test]
fn a_cpu_twin_that_panics_names_its_stage_and_launch_eagerly_and_replayed() {
    let ctx = Context::cpu();
    let stream = Stream::new(&ctx).unwrap();
    let (mut a, mut b, mut out) = buffers(&ctx, &stream);
    stream.synchronize().unwrap();
    let mut heat = Heat::new(&ctx).unwrap();
    let eager = heat
        .run(params(&mut a, &mut b, &mut out))
        .unwrap()
        .wait()
        .unwrap_err();
    assert_names_the_panicking_launch(&eager);
    let mut graph = heat.capture(params(&mut a, &mut b, &mut out)).unwrap();
    graph.launch().unwrap();
    let replayed = graph.synchronize().unwrap_err();
    assert_names_the_panicking_launch(&replayed);
}

#[test]
fn a_buffer_of_another_context_is_named_by_the_kernel_parameter() {
    let ctx = Context::cpu();
    let stream = Stream::new(&ctx).unwrap();
    let (mut a, _, mut out) = buffers(&ctx, &stream);
    // Each `Context::cpu()` is a device of its own: `b` made on another one.
    let other = Context::cpu();
    let mut b = DeviceBuffer::<f32>::zeros(&Stream::new(&other).unwrap(), N).unwrap();
    stream.synchronize().unwrap();
    let mut heat = Heat::new(&ctx).unwrap();
    let err = heat
        .run(params(&mut a, &mut b, &mut out))
        .map(|_| ())
        .unwrap_err();
    let message = err.report().to_string();
    for part in [
        "pipeline `Heat`, stage `step`",
        "argument 3 (`dst`) of `diffuse` of module `k` is a buffer of another context",
        "create both from one `Context`",
    ] {
        assert!(message.contains(part), "missing {part:?} in: {message}");
    }
}

/// A buffer of the CPU backend passed to a launch on a CUDA stream: the same message, naming
/// the kernel and the argument, before anything is enqueued.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_cpu_backend_buffer_is_named_by_its_argument() {
    use gpu_pipeline::{LaunchConfig, Module};
    let ctx = Context::cuda(0).expect("a CUDA device");
    let stream = Stream::new(&ctx).unwrap();
    let module = Module::load_ptx(&ctx, include_str!("../../runtime/kernels/test_kernels.ptx"))
        .unwrap()
        .named("test_kernels");
    // SAFETY: add_scalar(unsigned n, float value, float* data), indexing data below n; the
    // launch is refused before it runs.
    let add = unsafe {
        module
            .function("add_scalar")
            .unwrap()
            .typed::<(u32, f32, &mut [f32])>()
            .unwrap()
    };
    let cpu = Context::cpu();
    let mut data = DeviceBuffer::<f32>::zeros(&Stream::new(&cpu).unwrap(), 4).unwrap();
    let err = add
        .launch(&stream, LaunchConfig::new(1, 32), (4u32, 1.0f32, &mut data))
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(
            "argument 2 of `add_scalar` of module `test_kernels` is a buffer of another context"
        ),
        "{message}"
    );
}

#[test]
fn a_host_closure_that_panics_names_its_stage() {
    let ctx = Context::cpu();
    let mut logged = Logged::new(&ctx).unwrap();
    let err = logged
        .run(LoggedParams { steps: 5 })
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Step {
                pipeline: "Logged",
                stage: Some("log"),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        matches!(
            err.root(),
            Error::HostPanic {
                stage: Some("log"),
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.report().to_string();
    assert!(
        message.contains("a host function of stage `log` on stream")
            && message.contains("index out of bounds"),
        "{message}"
    );
    assert!(!message.contains("fault tracking is off"), "{message}");
}

#[test]
fn a_forgotten_synchronize_before_the_first_step_is_a_race_that_says_how_to_order_it() {
    let ctx = Context::cpu_checked();
    let stream = Stream::new(&ctx).unwrap();
    // `zeros` zeroes `b` in `stream`'s order; the newcomer runs the step without waiting.
    let (mut a, mut b, mut out) = buffers(&ctx, &stream);
    let mut heat = Heat::new(&ctx).unwrap();
    let err = heat
        .run(HeatParams {
            n: N as u32 - 1,
            alpha: 0.1,
            a: &mut a,
            b: &mut b,
            out: &mut out,
        })
        .unwrap()
        .wait()
        .unwrap_err();
    let message = err.report().to_string();
    for part in [
        "pipeline `Heat`: a step failed: ",
        "race on `b`",
        "`launch k::diffuse` on stream `Heat.compute`",
        "synchronize stream `stream #",
    ] {
        assert!(message.contains(part), "missing {part:?} in: {message}");
    }
    // Not the CUDA backend's reason for naming no stage: the race names both operations.
    assert!(!message.contains("fault tracking is off"), "{message}");
}
