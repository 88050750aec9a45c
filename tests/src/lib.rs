//! Integration tests for gpu-pipeline live in `tests/tests/`; shared helpers go here.
//!
//! The GPU bundle runs every test binary under NVIDIA's compute-sanitizer too
//! (`bash .gpu/run sanitize`), which counts every driver error as a failure and also fails a
//! binary that never calls CUDA. [`under_compute_sanitizer`] lets a test that provokes a
//! driver error on purpose (a bad PTX image, an out-of-memory request, an illegal address)
//! skip itself there — it ran and passed in the normal run — and
//! [`touch_cuda_for_compute_sanitizer`] gives a binary that tests only the host backend one
//! instrumented driver call there.

use std::ffi::c_uint;

pub mod anchor;
pub mod condition_kernels;
pub mod cpu_ranks;
pub mod device_ring;
pub mod faulty;
pub mod mismatch;
pub mod multi;
pub mod onesided;
pub mod ranks;
pub mod segv;
pub mod sync_policy;

/// Runs each named `fn NAME(&Context)` twice: in `mod cpu_backend` on a checked CPU context
/// (in CI), and in `mod gpu` on CUDA device 0 (`#[ignore]`d without a GPU).
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident,)*) => {
        mod cpu_backend {
            $(
                #[test]
                fn $name() {
                    super::$name(&gpu_pipeline::Context::cpu_checked());
                }
            )*
        }
        mod gpu {
            $(
                #[test]
                #[ignore = "needs a CUDA GPU"]
                fn $name() {
                    super::$name(&gpu_pipeline::Context::cuda(0).unwrap());
                }
            )*
        }
    };
}

/// Runs each named `fn NAME(&Context) -> gpu_pipeline::Result<()>` twice: in
/// `mod cpu_checked` on a checked CPU context, asserting that it succeeds and that the race
/// detector found nothing (in CI), and in `mod cuda` on CUDA device 0, asserting that it
/// succeeds (`#[ignore]`d without a GPU).
#[macro_export]
macro_rules! on_both_backends_race_free {
    ($($name:ident),* $(,)?) => {
        mod cpu_checked {
            $(
                #[test]
                fn $name() {
                    let ctx = gpu_pipeline::Context::cpu_checked();
                    super::$name(&ctx).unwrap();
                    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
                }
            )*
        }
        mod cuda {
            $(
                #[test]
                #[ignore = "needs a CUDA GPU"]
                fn $name() {
                    super::$name(&gpu_pipeline::Context::cuda(0).unwrap()).unwrap();
                }
            )*
        }
    };
}

/// Whether this process runs under compute-sanitizer (it injects its collector library).
pub fn under_compute_sanitizer() -> bool {
    std::env::var_os("NVTX_INJECTION64_PATH")
        .is_some_and(|path| path.to_string_lossy().contains("sanitizer"))
}

/// Skips the calling test under compute-sanitizer, printing why. Returns `true` when the
/// caller should return early.
pub fn skip_under_compute_sanitizer(why: &str) -> bool {
    let skip = under_compute_sanitizer();
    if skip {
        println!("skipped under compute-sanitizer: {why}");
        // A binary whose only test skips would otherwise never call CUDA there.
        touch_cuda_for_compute_sanitizer();
    }
    skip
}

/// Under compute-sanitizer, calls `cuInit` once through the driver library directly, so a
/// test binary that exercises only the host backend has an instrumented API call. Does
/// nothing elsewhere (CI has no driver).
pub fn touch_cuda_for_compute_sanitizer() {
    if !under_compute_sanitizer() {
        return;
    }
    type CuInit = unsafe extern "C" fn(c_uint) -> i32;
    // SAFETY: loading the CUDA driver library runs its initialisers, which have no
    // preconditions.
    let Ok(library) = (unsafe { libloading::Library::new("libcuda.so.1") }) else {
        return;
    };
    // SAFETY: `cuInit` has this signature in every CUDA driver.
    if let Ok(cu_init) = unsafe { library.get::<CuInit>(b"cuInit\0") } {
        // SAFETY: cuInit takes flags that must be 0.
        let code = unsafe { cu_init(0) };
        assert_eq!(code, 0, "cuInit failed under compute-sanitizer");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn instrumented_under_compute_sanitizer() {
        super::touch_cuda_for_compute_sanitizer();
    }
}
