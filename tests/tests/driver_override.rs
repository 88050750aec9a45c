//! `GPU_PIPELINE_LIBCUDA` naming a file that does not load is an error from
//! `Context::auto()`, naming the variable, the path and the dynamic loader's own message,
//! rather than a quiet fall-back to the CPU backend with status 0.
//!
//! A binary of its own: the variable must be set before the process's first driver call.

use gpu_pipeline::{Context, DRIVER_PATH_ENV, Error};

const MISSING: &str = "/nonexistent/gpu-pipeline-override/libcuda.so.1";

#[test]
fn a_driver_path_that_does_not_load_is_an_error_from_auto() {
    // compute-sanitizer fails a binary that never calls CUDA: one direct call there.
    tests::touch_cuda_for_compute_sanitizer();

    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::remove_var(gpu_pipeline::BACKEND_ENV) };
    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::set_var(DRIVER_PATH_ENV, MISSING) };

    let err = Context::auto().expect_err("a named driver that does not load is an error");
    let Error::DriverNotFound { tried } = &err else {
        panic!("expected DriverNotFound, got {err:?}");
    };
    assert_eq!(tried.len(), 1, "{tried:?}");
    assert_eq!(tried[0].path, MISSING);
    let message = err.to_string();
    assert!(message.contains(DRIVER_PATH_ENV), "{message}");
    // dlerror's text (libloading's error source), not libloading's bare "dlopen failed".
    assert!(
        message.contains("cannot open shared object file"),
        "{message}"
    );
    assert!(!message.contains("dlopen failed"), "{message}");
    // The same error again: the failed load is cached, never a fall-back.
    assert!(matches!(Context::auto(), Err(Error::DriverNotFound { .. })));
}
