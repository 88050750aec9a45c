//! An asynchronous fault inside a generated pipeline surfaces at the wait as an error that
//! names the pipeline and the first stage that did not complete. Its own test binary: an
//! illegal address poisons the CUDA context for the rest of the process.

use tests::faulty::{assert_names_crash, fault_of_faulty};

#[test]
#[ignore = "needs a CUDA GPU"]
fn with_tracking_on_a_device_fault_names_the_pipeline_and_the_first_incomplete_stage() {
    if tests::skip_under_compute_sanitizer("a kernel writes an illegal address on purpose") {
        return;
    }
    assert_names_crash(&fault_of_faulty(true, None));
}
