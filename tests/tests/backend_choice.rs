//! `Context::auto` picks CUDA device 0 when a driver loads and sees a device, the CPU
//! backend otherwise, and `GPU_PIPELINE_BACKEND` forces either; a driver that
//! `GPU_PIPELINE_LIBCUDA` names and that does not load is an error. One test function: the
//! environment is process-wide, and the driver is loaded once per process.

use gpu_pipeline::{BACKEND_ENV, Backend, Context, DRIVER_PATH_ENV, Error};

#[test]
fn auto_follows_the_environment_then_falls_back_to_the_cpu() {
    // compute-sanitizer fails a binary that never calls CUDA: one direct call there.
    tests::touch_cuda_for_compute_sanitizer();

    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::set_var(BACKEND_ENV, "cpu") };
    let ctx = Context::auto().unwrap();
    assert_eq!(ctx.backend(), Backend::Cpu);
    assert!(!ctx.is_checked());

    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::set_var(BACKEND_ENV, "cpu-checked") };
    assert!(Context::auto().unwrap().is_checked());

    // The names of earlier versions still work.
    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::set_var(BACKEND_ENV, "host") };
    let ctx = Context::auto().unwrap();
    assert_eq!(ctx.backend(), Backend::Cpu);
    assert!(!ctx.is_checked());
    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::set_var(BACKEND_ENV, "host-checked") };
    assert!(Context::auto().unwrap().is_checked());

    // SAFETY: the only test in this binary: no other thread reads the environment.

    unsafe { std::env::set_var(BACKEND_ENV, "gpu-please") };
    let err = Context::auto().unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                call: "Context::auto",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("use `cuda`, `cpu` or `cpu-checked`"),
        "{err}"
    );

    // No backend variable, and a driver path that does not load: an error, not a quiet
    // fall-back to the CPU (tests/driver_override.rs checks its message).
    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::remove_var(BACKEND_ENV) };
    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::set_var(DRIVER_PATH_ENV, "/nonexistent/libcuda.so.1") };
    assert!(matches!(Context::auto(), Err(Error::DriverNotFound { .. })));
    // The CPU backend is still one variable away.
    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::set_var(BACKEND_ENV, "cpu") };
    assert_eq!(Context::auto().unwrap().backend(), Backend::Cpu);

    // Forcing CUDA without a driver is the driver's error.
    // SAFETY: the only test in this binary: no other thread reads the environment.
    unsafe { std::env::set_var(BACKEND_ENV, "cuda") };
    assert!(matches!(Context::auto(), Err(Error::DriverNotFound { .. })));
}
