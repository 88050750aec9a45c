//! Without a driver every entry point fails with `DriverNotFound`, naming the paths tried,
//! and nothing panics. The override variable points the loader at a path that cannot exist,
//! so this runs the same on a GPU machine and on CI.
//!
//! One test function: the variable must be set before the first driver call in the process,
//! and tests in one binary share the process.

use gpu_pipeline::{
    Context, DRIVER_PATH_ENV, Device, Error, Event, FlagCell, Stream, driver_is_available,
    driver_version,
};

const BOGUS: &str = "/nonexistent/gpu-pipeline-test/libcuda.so.1";

fn assert_not_found<T: std::fmt::Debug>(what: &str, result: gpu_pipeline::Result<T>) {
    match result {
        Err(Error::DriverNotFound { tried }) => {
            assert_eq!(tried.len(), 1, "{what}: {tried:?}");
            assert_eq!(tried[0].path, BOGUS, "{what}");
        }
        other => panic!("{what}: expected DriverNotFound, got {other:?}"),
    }
}

#[test]
fn every_entry_point_reports_driver_not_found() {
    // compute-sanitizer fails a binary that never calls CUDA: one direct call there.
    tests::touch_cuda_for_compute_sanitizer();

    // SAFETY: this is the only test in this binary, so no other thread reads the environment.
    unsafe { std::env::set_var(DRIVER_PATH_ENV, BOGUS) };

    assert!(!driver_is_available());
    assert_not_found("driver_version", driver_version());
    assert_not_found("Device::count", Device::count());
    assert_not_found("Device::get", Device::get(0));
    assert_not_found("Context::cuda", Context::cuda(0));

    // The message lists the path and says what failed, for a user reading a log.
    let message = Context::cuda(0).unwrap_err().to_string();
    assert!(
        message.starts_with("no CUDA driver library could be loaded; tried `"),
        "{message}"
    );
    assert!(message.contains(BOGUS), "{message}");

    // Types that need a context cannot be reached without one; their constructors are
    // covered by the Context error above. FlagCell, Event and Stream are named here so this
    // test fails to compile if their constructors stop taking a context.
    let _constructors: [&dyn Fn(&Context); 3] =
        [&|c| drop(Stream::new(c)), &|c| drop(Event::new(c)), &|c| {
            drop(FlagCell::<u32>::new(c, 0))
        }];
}
