//! A fault inside a generated pipeline on the CPU backend (a kernel implementation that
//! panics) surfaces at the wait as an error naming the pipeline, the stage and the launch that
//! failed. CPU streams keep running after a fault, so the progress marks of fault tracking
//! name no stage there; the failed operation names the stage that enqueued it instead, with
//! tracking on or off. The CUDA twins, where a fault stops all later work, are
//! `gpu_fault_pipeline.rs` (tracking on) and `gpu_fault_untracked.rs` (default).

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }

    pub fn write_out_of_bounds(data: &mut [f32]) {
        // What the CUDA kernel does, as safe Rust: an index past the end panics.
        let past = data.len();
        data[past] = 1.0;
    }
}

gpu_pipeline! {
    /// `ok` runs, `crash` fails, `after` waits for `crash`, `independent` does not.
    pipeline Faulty {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]) cpu = cpu::add_scalar;
            fn write_out_of_bounds(data: &mut [f32]) cpu = cpu::write_out_of_bounds;
        }
        params { n: u32, data: &mut DeviceBuffer<f32>, other: &mut DeviceBuffer<f32> }
        stage ok on main { launch k::add_scalar(n, 1.0f32, data) grid 1u32 block 32u32; }
        stage crash on main { launch k::write_out_of_bounds(data) grid 1u32 block 1u32; }
        stage after on side { launch k::add_scalar(n, 1.0f32, data) grid 1u32 block 32u32; }
        stage independent on side { launch k::add_scalar(n, 2.0f32, other) grid 1u32 block 32u32; }
    }
}

/// Runs one faulting step with tracking as `tracking` sets it (`None`: the default) and
/// returns its error.
fn fault(tracking: Option<bool>) -> Error {
    let ctx = Context::cpu();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    let mut other = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Faulty::new(&ctx).unwrap();
    if let Some(on) = tracking {
        pipeline.set_fault_tracking(on);
    }
    pipeline
        .run(FaultyParams {
            n: 32,
            data: &mut data,
            other: &mut other,
        })
        .unwrap()
        .wait()
        .unwrap_err()
}

#[test]
fn by_default_a_cpu_fault_names_the_pipeline_and_the_stage_of_the_failing_launch() {
    let err = fault(None);
    match &err {
        Error::Step {
            pipeline, stage, ..
        } => {
            assert_eq!(*pipeline, "Faulty");
            assert_eq!(*stage, Some("crash"), "the failed launch's stage: {err}");
        }
        other => panic!("expected Error::Step, got {other:?}"),
    }
    let message = err.report().to_string();
    // Not the CUDA backend's reason for naming no stage, which is false here.
    assert!(!message.contains("fault tracking is off"), "{message}");
    assert!(
        message.contains("`launch k::write_out_of_bounds` of stage `crash`")
            && message.contains("panicked")
            && message.contains("CPU implementation"),
        "the fault names the failing launch, its stage, and what to fix: {message}"
    );
}

#[test]
fn with_tracking_on_the_cpu_fault_still_names_the_failing_launch() {
    let err = fault(Some(true));
    assert!(
        matches!(
            err,
            Error::Step {
                pipeline: "Faulty",
                ..
            }
        ),
        "{err:?}"
    );
    let chain = err.report().to_string();
    assert!(chain.contains("write_out_of_bounds"), "{chain}");
    assert!(
        matches!(
            err,
            Error::Step {
                stage: Some("crash"),
                ..
            }
        ),
        "{err:?}"
    );
}

gpu_pipeline! {
    /// The failing launch inside an `if` inside a device `while`: in a captured graph it is a
    /// node of a conditional node's body.
    pipeline FaultyBody {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]) cpu = cpu::add_scalar;
            fn write_out_of_bounds(data: &mut [f32]) cpu = cpu::write_out_of_bounds;
        }
        params { n: u32, data: &mut DeviceBuffer<f32>, count: &mut DeviceBuffer<f32> }
        stage sweep on main {
            while count < 3.0f32 max 10u32 {
                launch k::add_scalar(1u32, 1.0f32, count) grid 1u32 block 1u32;
                if count >= 2.0f32 {
                    launch k::write_out_of_bounds(data) grid 1u32 block 1u32;
                }
            }
        }
    }
}

/// A launch that fails inside a conditional body of a replayed graph is named as eagerly:
/// the launch and its stage, with the advice for a panicking CPU implementation (it named the
/// `while` node around it, `count < 3.0f32`, with no stage).
#[test]
fn a_cpu_fault_inside_a_loop_body_of_a_graph_names_the_launch_and_its_stage() {
    let ctx = Context::cpu();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    let mut count = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = FaultyBody::new(&ctx).unwrap();
    let params = FaultyBodyParams {
        n: 32,
        data: &mut data,
        count: &mut count,
    };
    let mut graph = pipeline.capture(params).unwrap();
    graph.launch().unwrap();
    let err = graph.synchronize().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Step {
                pipeline: "FaultyBody",
                stage: Some("sweep"),
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.report().to_string();
    assert!(
        message.contains("`launch k::write_out_of_bounds` of stage `sweep`")
            && message.contains("CPU implementation"),
        "{message}"
    );
}
