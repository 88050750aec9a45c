//! A fault in the first of several eager steps enqueued at once is placed in that step: with
//! fault tracking on, each step's marks carry its number (no reset between steps), and the
//! report names the first stage of the faulting step that did not complete, not a stage of
//! the steps after it, which never ran. Its own test binary: an illegal address poisons the
//! CUDA context for the rest of the process (`gpu_fault_pipeline.rs` is the one-step twin).

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

gpu_pipeline! {
    /// `ok` runs, `crash` writes to an unmapped address, `after` waits for `crash`.
    pipeline Faulty {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
            fn write_out_of_bounds(data: &mut [f32]);
        }
        params { n: u32, data: &mut DeviceBuffer<f32>, other: &mut DeviceBuffer<f32> }
        stage ok on main { launch k::add_scalar(n, 1.0f32, data) grid 1u32 block 32u32; }
        stage crash on main { launch k::write_out_of_bounds(data) grid 1u32 block 1u32; }
        stage after on side { launch k::add_scalar(n, 1.0f32, data) grid 1u32 block 32u32; }
        stage independent on side { launch k::add_scalar(n, 2.0f32, other) grid 1u32 block 32u32; }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn with_tracking_on_a_fault_in_the_first_of_three_steps_names_its_stage() {
    if tests::skip_under_compute_sanitizer("a kernel writes an illegal address on purpose") {
        return;
    }

    let ctx = Context::cuda(0).unwrap();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    let mut other = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Faulty::new(&ctx).unwrap();
    pipeline.set_fault_tracking(true);
    let run = pipeline
        .run_steps(
            FaultyParams {
                n: 32,
                data: &mut data,
                other: &mut other,
            },
            3,
        )
        .unwrap();
    let err = run.wait().unwrap_err();
    match &err {
        Error::Step {
            pipeline,
            stage,
            source,
        } => {
            assert_eq!(*pipeline, "Faulty");
            assert_eq!(*stage, Some("crash"), "{err}");
            assert!(
                source.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
                "{err}"
            );
        }
        other => panic!("expected Error::Step, got {other:?}"),
    }
    let message = err.to_string();
    // The cause follows the pipeline's context in the message itself.
    assert!(
        message.starts_with("pipeline `Faulty`: a step failed before stage `crash` completed: "),
        "{message}"
    );
    assert!(message.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{message}");
    // The driver's text comes once, from the source, in a report of the whole chain.
    let report = err.report().to_string();
    assert_eq!(
        report.matches("CUDA_ERROR_ILLEGAL_ADDRESS").count(),
        1,
        "{report}"
    );
}
