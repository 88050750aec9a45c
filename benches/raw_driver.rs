//! The raw CUDA driver as the benchmarks' baselines call it: libcuda opened by path, as a
//! program without our runtime would, and its exported entry points looked up by name.
//!
//! One file, included with `#[path]` by each bench that measures the runtime against the
//! raw driver (`runtime/benches/launch.rs`, `runtime/benches/graph_build.rs`,
//! `tests/benches/pipeline.rs`): each keeps its own table of the entry points it calls.

use gpu_pipeline::sys::CUresult;
use libloading::Library;

/// What a bench's setup returns.
pub type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// libcuda, opened from [`DRIVER_PATH_ENV`](gpu_pipeline::DRIVER_PATH_ENV) when set (and not
/// empty), else `libcuda.so.1`. Keep it alive as long as any entry point taken from it.
pub struct Driver {
    library: Library,
}

impl Driver {
    /// Opens the driver library (the one the runtime loaded in this process).
    pub fn open() -> BoxResult<Driver> {
        let path = std::env::var(gpu_pipeline::DRIVER_PATH_ENV)
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "libcuda.so.1".to_owned());
        // SAFETY: the CUDA driver library, already loaded by the runtime in this process; its
        // initialisers are the driver's own.
        let library = unsafe { Library::new(&path)? };
        Ok(Driver { library })
    }

    /// The exported entry point `symbol` (NUL-terminated, e.g. `b"cuLaunchKernel\0"`).
    ///
    /// # Safety
    /// `T` must be the function-pointer type of that export (`gpu_pipeline::sys` declares
    /// them; a `_v2` export is the CUDA 12 ABI the runtime uses too).
    pub unsafe fn get<T: Copy>(&self, symbol: &[u8]) -> BoxResult<T> {
        // SAFETY: the caller names the export's type.
        Ok(unsafe { *self.library.get::<T>(symbol)? })
    }
}

/// `Ok` when `code` is `CUDA_SUCCESS`, else an error naming the driver call.
pub fn check(code: CUresult, call: &str) -> BoxResult<()> {
    if code.is_success() {
        Ok(())
    } else {
        Err(format!("{call} failed with {code:?}").into())
    }
}
