//! An illegal memory access inside a kernel is asynchronous: the launch succeeds, and the
//! fault surfaces at the next synchronize as the driver's sticky error. Its own test binary,
//! since a sticky error poisons the context for the rest of the process.

use gpu_pipeline::sys::CUresult;
use gpu_pipeline::{Context, DeviceBuffer, Error, LaunchConfig, Module, Stream};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_illegal_address_surfaces_at_the_next_synchronize_as_a_sticky_error() {
    if tests::skip_under_compute_sanitizer("a kernel writes an illegal address on purpose") {
        return;
    }

    let ctx = Context::cuda(0).expect("a CUDA device");
    let stream = Stream::non_blocking(&ctx).unwrap();
    let module = Module::load_ptx(&ctx, PTX).unwrap().named("test_kernels");
    // SAFETY: write_out_of_bounds(float* data): it writes (to an unmapped address, on purpose).
    let kernel = unsafe {
        module
            .function("write_out_of_bounds")
            .unwrap()
            .typed::<(&mut [f32],)>()
            .unwrap()
    };
    let mut data = DeviceBuffer::<f32>::alloc(&ctx, 16).unwrap();
    stream.synchronize().unwrap();

    // Enqueueing succeeds: the fault happens later, on the device.
    kernel
        .launch(&stream, LaunchConfig::new(1, 1), (&mut data,))
        .unwrap();
    let err = stream.synchronize().unwrap_err();
    let Error::Driver(driver) = &err else {
        panic!("expected a driver error, got {err:?}");
    };
    assert_eq!(driver.call, "cuStreamSynchronize", "{err}");
    assert_eq!(driver.code, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS, "{err}");
    assert_eq!(driver.name, "CUDA_ERROR_ILLEGAL_ADDRESS", "{err}");
    assert!(driver.is_sticky());
    assert!(
        err.to_string()
            .starts_with("cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS (700)"),
        "{err}"
    );

    // Sticky: every later call on the context fails the same way.
    let again = ctx.synchronize().unwrap_err();
    assert_eq!(
        again.code(),
        Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        "{again}"
    );

    // Dropping everything afterwards must not panic (frees fail and are logged or leaked).
    drop(kernel);
    drop(module);
    drop(data);
    drop(stream);
}
