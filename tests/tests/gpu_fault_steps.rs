//! A fault in the first of several eager steps enqueued at once is placed in that step: with
//! fault tracking on, each step's marks carry its number (no reset between steps), and the
//! report names the first stage of the faulting step that did not complete, not a stage of
//! the steps after it, which never ran. Its own test binary: an illegal address poisons the
//! CUDA context for the rest of the process (`gpu_fault_pipeline.rs` is the one-step twin).

use tests::faulty::{assert_names_crash, fault_of_faulty};

#[test]
#[ignore = "needs a CUDA GPU"]
fn with_tracking_on_a_fault_in_the_first_of_three_steps_names_its_stage() {
    if tests::skip_under_compute_sanitizer("a kernel writes an illegal address on purpose") {
        return;
    }
    assert_names_crash(&fault_of_faulty(true, Some(3)));
}
