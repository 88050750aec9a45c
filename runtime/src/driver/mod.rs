//! Loading the CUDA driver: the one function table, opened once and fallibly.
//!
//! Only `cuGetProcAddress` is looked up by name in the library; every other entry point comes
//! through it with an explicit CUDA version, so the driver hands back the ABI variant that
//! matches the signature declared in [`crate::sys`] (the `_v2` forms), whatever the driver's
//! own version. The table lives in a `OnceLock`; a failed load is cached too and every later
//! call returns the same error, never a panic.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

use libloading::Library;

mod table;

pub(crate) use table::Driver;

use crate::error::{DriverError, Error, LibraryAttempt, Result};
use crate::sys::{self, CUresult};

/// The environment variable that overrides the driver library's path.
pub const DRIVER_PATH_ENV: &str = "GPU_PIPELINE_LIBCUDA";

/// The library names tried, in order, when [`DRIVER_PATH_ENV`] is unset.
pub const DEFAULT_DRIVER_PATHS: [&str; 2] = ["libcuda.so.1", "libcuda.so"];

/// The CUDA version whose ABI we ask `cuGetProcAddress` for: 12.0.
const ABI_VERSION: c_int = 12000;

impl Driver {
    /// Unwraps an optional entry point, or says which one is missing.
    pub(crate) fn optional<F>(&self, f: Option<F>, symbol: &'static str) -> Result<F> {
        f.ok_or_else(|| Error::Unsupported {
            symbol,
            reason: format!(
                "the loaded driver (CUDA {}) does not export it",
                version_text(self.version)
            ),
        })
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// `12080` as `12.8`.
pub(crate) fn version_text(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// Which `cuGetProcAddress` the library exports.
enum Resolver {
    V2(sys::PFN_cuGetProcAddress_v2),
    V1(sys::PFN_cuGetProcAddress_v1),
}

impl Resolver {
    fn find(library: &Library) -> Result<Resolver> {
        // SAFETY: the symbol, when present, has the declared cuGetProcAddress_v2 signature.
        let v2 = unsafe { library.get::<sys::PFN_cuGetProcAddress_v2>(b"cuGetProcAddress_v2\0") };
        if let Ok(f) = v2 {
            return Ok(Resolver::V2(*f));
        }
        // SAFETY: the unversioned export is the CUDA 11.3 four-argument form.
        match unsafe { library.get::<sys::PFN_cuGetProcAddress_v1>(b"cuGetProcAddress\0") } {
            Ok(f) => Ok(Resolver::V1(*f)),
            Err(e) => Err(Error::Unsupported {
                symbol: "cuGetProcAddress",
                reason: format!(
                    "the library is older than CUDA 11.3 or is not a CUDA driver ({e})"
                ),
            }),
        }
    }

    fn lookup(&self, symbol: &str, version: c_int) -> (CUresult, *mut c_void) {
        let name = CString::new(symbol).expect("symbol names have no NUL");
        let mut pfn = std::ptr::null_mut();
        let code = match *self {
            Resolver::V2(f) => {
                let mut status = 0;
                // SAFETY: valid C string and out-pointers that outlive the call.
                unsafe {
                    f(
                        name.as_ptr(),
                        &mut pfn,
                        version,
                        sys::CU_GET_PROC_ADDRESS_DEFAULT,
                        &mut status,
                    )
                }
            }
            // SAFETY: as above.
            Resolver::V1(f) => unsafe {
                f(
                    name.as_ptr(),
                    &mut pfn,
                    version,
                    sys::CU_GET_PROC_ADDRESS_DEFAULT,
                )
            },
        };
        (code, pfn)
    }

    fn required(&self, symbol: &'static str, version: c_int) -> Result<*mut c_void> {
        match self.lookup(symbol, version) {
            (code, pfn) if code.is_success() && !pfn.is_null() => Ok(pfn),
            (code, _) => Err(Error::Unsupported {
                symbol,
                reason: format!(
                    "cuGetProcAddress found no CUDA {} version of it ({code:?}); gpu-pipeline needs a \
                     driver for CUDA 12.0 or newer",
                    version_text(version)
                ),
            }),
        }
    }

    fn optional(&self, symbol: &str, version: c_int) -> Option<*mut c_void> {
        match self.lookup(symbol, version) {
            (code, pfn) if code.is_success() && !pfn.is_null() => Some(pfn),
            _ => None,
        }
    }
}

/// Checks a status before the table (and so `cuGetErrorName`) exists.
fn check_raw(call: &'static str, code: CUresult) -> Result<()> {
    if code.is_success() {
        Ok(())
    } else {
        Err(DriverError {
            call,
            code,
            name: code.known_name().unwrap_or("CUDA_ERROR_UNKNOWN").to_owned(),
            description: "the driver failed before its error strings were available".to_owned(),
        }
        .into())
    }
}

/// The library paths to try: the override alone when set, else the defaults.
pub(crate) fn candidate_paths(override_path: Option<&str>) -> Vec<String> {
    match override_path {
        Some(path) if !path.is_empty() => vec![path.to_owned()],
        _ => DEFAULT_DRIVER_PATHS
            .iter()
            .map(|p| (*p).to_owned())
            .collect(),
    }
}

/// Opens the first loadable library among `paths`, resolves the table and initialises CUDA.
pub(crate) fn load_from(paths: &[String]) -> Result<Driver> {
    let mut tried = Vec::new();
    for path in paths {
        // SAFETY: loading libcuda runs its initialisers, which have no preconditions.
        let library = match unsafe { Library::new(path) } {
            Ok(library) => library,
            Err(e) => {
                tried.push(LibraryAttempt {
                    path: path.clone(),
                    reason: loader_message(&e),
                });
                continue;
            }
        };
        let resolver = Resolver::find(&library)?;
        // SAFETY: `resolver` is this library's own cuGetProcAddress.
        let driver = unsafe { Driver::resolve(library, &resolver)? };
        // SAFETY: cuInit takes flags that must be 0.
        let init = unsafe { (driver.cuInit)(0) };
        if !init.is_success() {
            return Err(driver_error_with(&driver, "cuInit", init).into());
        }
        tracing::debug!(path, version = %version_text(driver.version), "loaded the CUDA driver");
        return Ok(driver);
    }
    Err(Error::DriverNotFound { tried })
}

/// The dynamic loader's own text for a failed open (libloading's `Display` says only
/// "dlopen failed"; `dlerror`'s message, naming the file and the reason, is its source).
fn loader_message(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => e.to_string(),
    }
}

/// The path [`DRIVER_PATH_ENV`] names, when it is set and not empty.
pub(crate) fn override_path() -> Option<String> {
    std::env::var(DRIVER_PATH_ENV)
        .ok()
        .filter(|path| !path.is_empty())
}

static DRIVER: OnceLock<Result<Driver>> = OnceLock::new();

/// The process's driver table, loaded on first use. A failure is cached and returned again.
pub(crate) fn driver() -> Result<&'static Driver> {
    DRIVER
        .get_or_init(|| {
            let override_path = override_path();
            load_from(&candidate_paths(override_path.as_deref())).map_err(|e| match e {
                // Say where the one path tried came from.
                Error::DriverNotFound { mut tried } if override_path.is_some() => {
                    for attempt in &mut tried {
                        attempt.reason = format!("named by {DRIVER_PATH_ENV}: {}", attempt.reason);
                    }
                    Error::DriverNotFound { tried }
                }
                other => other,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Whether a CUDA driver loaded and initialised in this process (loading it if needed).
pub fn is_available() -> bool {
    driver().is_ok()
}

/// The loaded driver's CUDA version (e.g. `13000` for CUDA 13.0).
pub fn version() -> Result<i32> {
    driver().map(|d| d.version)
}

/// The driver's name and text for `code`, or placeholders when no driver is loaded.
pub(crate) fn describe(code: CUresult) -> (String, String) {
    match DRIVER.get() {
        Some(Ok(d)) => describe_with(d, code),
        _ => (
            code.known_name().unwrap_or("CUDA_ERROR_UNKNOWN").to_owned(),
            "no description: the driver is not loaded".to_owned(),
        ),
    }
}

fn describe_with(d: &Driver, code: CUresult) -> (String, String) {
    let read = |f: unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult| {
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: a valid out-pointer; on success the driver returns a static C string.
        let ok = unsafe { f(code, &mut text) }.is_success() && !text.is_null();
        ok.then(|| {
            // SAFETY: checked non-null above; the driver's strings are NUL-terminated and static.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        })
    };
    (
        read(d.cuGetErrorName).unwrap_or_else(|| format!("CUresult({})", code.0)),
        read(d.cuGetErrorString).unwrap_or_else(|| "unknown error code".to_owned()),
    )
}

/// The error for `code` returned by `call`, with the driver's name and text for it (see
/// [`describe`]).
pub(crate) fn driver_error(call: &'static str, code: CUresult) -> DriverError {
    let (name, description) = describe(code);
    DriverError {
        call,
        code,
        name,
        description,
    }
}

/// Like [`driver_error`], while the table is being built and not yet in the `OnceLock`.
fn driver_error_with(d: &Driver, call: &'static str, code: CUresult) -> DriverError {
    let (name, description) = describe_with(d, code);
    DriverError {
        call,
        code,
        name,
        description,
    }
}

/// Turns a status into a `Result`, naming the call on failure.
#[inline]
pub(crate) fn check(call: &'static str, code: CUresult) -> Result<()> {
    if code.is_success() {
        Ok(())
    } else {
        Err(driver_error(call, code).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_path_is_the_only_path_tried() {
        assert_eq!(
            candidate_paths(Some("/opt/cuda/libcuda.so")),
            vec!["/opt/cuda/libcuda.so"]
        );
        assert_eq!(
            candidate_paths(Some("")),
            vec!["libcuda.so.1", "libcuda.so"]
        );
        assert_eq!(candidate_paths(None), vec!["libcuda.so.1", "libcuda.so"]);
    }

    #[test]
    fn a_bogus_path_is_driver_not_found_naming_the_path() {
        let err = load_from(&["/nonexistent/libcuda-bogus.so".to_owned()]).unwrap_err();
        match &err {
            Error::DriverNotFound { tried } => {
                assert_eq!(tried.len(), 1);
                assert_eq!(tried[0].path, "/nonexistent/libcuda-bogus.so");
                assert!(!tried[0].reason.is_empty());
            }
            other => panic!("expected DriverNotFound, got {other:?}"),
        }
        assert!(
            err.to_string().contains("/nonexistent/libcuda-bogus.so"),
            "{err}"
        );
    }

    #[test]
    fn a_library_that_is_not_a_driver_is_unsupported() {
        // libc loads but exports no cuGetProcAddress.
        let err = load_from(&["libc.so.6".to_owned()]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unsupported {
                    symbol: "cuGetProcAddress",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn the_process_driver_loads_or_says_why() {
        match driver() {
            Ok(d) => assert!(d.version >= 12000, "CUDA {}", version_text(d.version)),
            Err(Error::DriverNotFound { tried }) => assert!(!tried.is_empty()),
            // A driver without a device, say: an error with the driver's own words.
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn versions_print_as_major_minor() {
        assert_eq!(version_text(12080), "12.8");
        assert_eq!(version_text(13000), "13.0");
    }
}
