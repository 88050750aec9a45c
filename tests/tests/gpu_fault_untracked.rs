//! With fault tracking off (the default), an asynchronous fault inside a generated pipeline
//! surfaces at the wait as an error that names the pipeline and says why no stage is named. Its own test binary: an
//! illegal address poisons the CUDA context for the rest of the process.

use gpu_pipeline::Error;
use tests::faulty::fault_of_faulty;

#[test]
#[ignore = "needs a CUDA GPU"]
fn by_default_a_device_fault_names_the_pipeline_only() {
    if tests::skip_under_compute_sanitizer("a kernel writes an illegal address on purpose") {
        return;
    }
    let err = fault_of_faulty(false, None);
    match &err {
        Error::Step {
            pipeline,
            stage,
            source,
        } => {
            assert_eq!(*pipeline, "Faulty");
            assert_eq!(*stage, None, "tracking is off by default: {err}");
            assert!(
                source.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
                "{err}"
            );
        }
        other => panic!("expected Error::Step, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message
            .starts_with("pipeline `Faulty`: a step failed (no stage named: fault tracking is off"),
        "{message}"
    );
}
