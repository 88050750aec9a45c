//! The benchmarks' pipelines and hand-written wirings, run on the checked host backend at a
//! tiny size: every variant's output is verified and the race detector must find nothing.
//! The benches themselves (`tests/benches/overlap.rs`, `events.rs`) need a GPU for their
//! timings; this keeps their event wiring proven in CI. The same checks run with
//! `cargo bench -p tests --bench overlap -- --check-host` (and `--bench events`).

#[allow(
    dead_code,
    reason = "the bench's timing and printing code, which only its own `main` uses"
)]
#[path = "../benches/events.rs"]
mod events;

#[test]
fn the_overlap_bench_variants_are_correct_and_race_free() {
    if let Err(e) = events::overlap::check_host() {
        panic!("{e}");
    }
}

#[test]
fn the_events_bench_variants_are_correct_and_race_free() {
    if let Err(e) = events::check_host() {
        panic!("{e}");
    }
}

/// compute-sanitizer fails a binary that never calls CUDA; this gives it one call there.
#[test]
fn instrumented_under_compute_sanitizer() {
    tests::touch_cuda_for_compute_sanitizer();
}
