//! The pipeline the device-fault tests share (`gpu_fault_pipeline`, `gpu_fault_steps`,
//! `gpu_fault_untracked`: each its own binary, since an illegal address poisons the CUDA
//! context for the rest of the process), how they run it, and what a tracked report says.

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

gpu_pipeline! {
    /// `ok` runs, `crash` writes to an unmapped address, `after` waits for `crash`.
    pub pipeline Faulty {
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

/// Runs [`Faulty`] on CUDA device 0, with fault tracking turned on when `tracking` (else left
/// at its default, off), as one step (`steps: None`,
/// `run`) or `steps` steps enqueued at once (`run_steps`), and returns the error its wait
/// reports. Panics if anything before the wait fails, or the wait succeeds.
pub fn fault_of_faulty(tracking: bool, steps: Option<usize>) -> Error {
    let ctx = Context::cuda(0).unwrap();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    let mut other = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Faulty::new(&ctx).unwrap();
    if tracking {
        pipeline.set_fault_tracking(true);
    }
    let params = FaultyParams {
        n: 32,
        data: &mut data,
        other: &mut other,
    };
    let run = match steps {
        None => pipeline.run(params),
        Some(steps) => pipeline.run_steps(params, steps),
    };
    run.unwrap().wait().unwrap_err()
}

/// `err` is [`Faulty`]'s tracked report of the illegal address: an [`Error::Step`] naming the
/// pipeline and stage `crash`, the cause after the pipeline's context in the message, the
/// driver's text once in the report of the whole chain.
pub fn assert_names_crash(err: &Error) {
    match err {
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
    assert!(
        message.starts_with("pipeline `Faulty`: a step failed before stage `crash` completed: "),
        "{message}"
    );
    assert!(message.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{message}");
    let report = err.report().to_string();
    assert_eq!(
        report.matches("CUDA_ERROR_ILLEGAL_ADDRESS").count(),
        1,
        "{report}"
    );
}
