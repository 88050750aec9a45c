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

use crate::error::{Error, LibraryAttempt, Result};
use crate::sys::{self, CUresult};

/// The environment variable that overrides the driver library's path.
pub const DRIVER_PATH_ENV: &str = "GPU_PIPELINE_LIBCUDA";

/// The library names tried, in order, when [`DRIVER_PATH_ENV`] is unset.
pub const DEFAULT_DRIVER_PATHS: [&str; 2] = ["libcuda.so.1", "libcuda.so"];

/// The CUDA version whose ABI we ask `cuGetProcAddress` for: 12.0.
const ABI_VERSION: c_int = 12000;

/// Declares the function table: required entry points fail the load when missing; optional
/// ones are `None` and become [`Error::Unsupported`] when called.
macro_rules! driver_table {
    (
        required { $($name:ident @ $ver:expr,)* }
        optional { $($oname:ident @ $over:expr,)* }
    ) => {
        /// The loaded driver: its version and every entry point we call.
        #[allow(non_snake_case)]
        pub(crate) struct Driver {
            /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
            pub(crate) version: i32,
            $(pub(crate) $name: paste_pfn!($name),)*
            $(pub(crate) $oname: Option<paste_pfn!($oname)>,)*
            // Keeps the library mapped for as long as the pointers above are used: forever.
            _library: Library,
        }

        impl Driver {
            /// Resolves every entry point through `cuGetProcAddress`.
            ///
            /// # Safety
            /// `resolver` must be the library's real `cuGetProcAddress`.
            #[allow(non_snake_case)]
            unsafe fn resolve(library: Library, resolver: &Resolver) -> Result<Driver> {
                $(
                    // SAFETY: `sys` declares the C signature of the `@ $ver` ABI of this
                    // symbol, which is the variant cuGetProcAddress returns for that version.
                    let $name = unsafe {
                        std::mem::transmute::<*mut c_void, paste_pfn!($name)>(
                            resolver.required(stringify!($name), $ver)?,
                        )
                    };
                )*
                $(
                    // SAFETY: as above.
                    let $oname = resolver.optional(stringify!($oname), $over).map(|p| unsafe {
                        std::mem::transmute::<*mut c_void, paste_pfn!($oname)>(p)
                    });
                )*
                let mut driver = Driver { version: 0, $($name,)* $($oname,)* _library: library };
                let mut version = 0;
                // SAFETY: a valid out-pointer; cuDriverGetVersion works before cuInit.
                check_raw("cuDriverGetVersion", unsafe { (driver.cuDriverGetVersion)(&mut version) })?;
                driver.version = version;
                Ok(driver)
            }
        }
    };
}

/// Maps a symbol name to its `sys::PFN_` type.
macro_rules! paste_pfn {
    (cuInit) => {
        sys::PFN_cuInit
    };
    (cuDriverGetVersion) => {
        sys::PFN_cuDriverGetVersion
    };
    (cuGetErrorName) => {
        sys::PFN_cuGetErrorName
    };
    (cuGetErrorString) => {
        sys::PFN_cuGetErrorString
    };
    (cuDeviceGetCount) => {
        sys::PFN_cuDeviceGetCount
    };
    (cuDeviceGet) => {
        sys::PFN_cuDeviceGet
    };
    (cuDeviceGetName) => {
        sys::PFN_cuDeviceGetName
    };
    (cuDeviceTotalMem) => {
        sys::PFN_cuDeviceTotalMem
    };
    (cuDeviceGetAttribute) => {
        sys::PFN_cuDeviceGetAttribute
    };
    (cuDeviceGetDefaultMemPool) => {
        sys::PFN_cuDeviceGetDefaultMemPool
    };
    (cuDevicePrimaryCtxRetain) => {
        sys::PFN_cuDevicePrimaryCtxRetain
    };
    (cuDevicePrimaryCtxRelease) => {
        sys::PFN_cuDevicePrimaryCtxRelease
    };
    (cuCtxSetCurrent) => {
        sys::PFN_cuCtxSetCurrent
    };
    (cuCtxGetCurrent) => {
        sys::PFN_cuCtxGetCurrent
    };
    (cuCtxSynchronize) => {
        sys::PFN_cuCtxSynchronize
    };
    (cuCtxGetStreamPriorityRange) => {
        sys::PFN_cuCtxGetStreamPriorityRange
    };
    (cuStreamCreate) => {
        sys::PFN_cuStreamCreate
    };
    (cuStreamCreateWithPriority) => {
        sys::PFN_cuStreamCreateWithPriority
    };
    (cuStreamDestroy) => {
        sys::PFN_cuStreamDestroy
    };
    (cuStreamSynchronize) => {
        sys::PFN_cuStreamSynchronize
    };
    (cuStreamQuery) => {
        sys::PFN_cuStreamQuery
    };
    (cuStreamWaitEvent) => {
        sys::PFN_cuStreamWaitEvent
    };
    (cuStreamGetFlags) => {
        sys::PFN_cuStreamGetFlags
    };
    (cuStreamGetPriority) => {
        sys::PFN_cuStreamGetPriority
    };
    (cuStreamGetId) => {
        sys::PFN_cuStreamGetId
    };
    (cuStreamGetCtx) => {
        sys::PFN_cuStreamGetCtx
    };
    (cuStreamGetDevice) => {
        sys::PFN_cuStreamGetDevice
    };
    (cuLaunchHostFunc) => {
        sys::PFN_cuLaunchHostFunc
    };
    (cuStreamAddCallback) => {
        sys::PFN_cuStreamAddCallback
    };
    (cuStreamCopyAttributes) => {
        sys::PFN_cuStreamCopyAttributes
    };
    (cuStreamGetAttribute) => {
        sys::PFN_cuStreamGetAttribute
    };
    (cuStreamSetAttribute) => {
        sys::PFN_cuStreamSetAttribute
    };
    (cuStreamAttachMemAsync) => {
        sys::PFN_cuStreamAttachMemAsync
    };
    (cuStreamWriteValue32) => {
        sys::PFN_cuStreamWriteValue32
    };
    (cuStreamWriteValue64) => {
        sys::PFN_cuStreamWriteValue64
    };
    (cuStreamWaitValue32) => {
        sys::PFN_cuStreamWaitValue32
    };
    (cuStreamWaitValue64) => {
        sys::PFN_cuStreamWaitValue64
    };
    (cuStreamBatchMemOp) => {
        sys::PFN_cuStreamBatchMemOp
    };
    (cuStreamBeginCapture) => {
        sys::PFN_cuStreamBeginCapture
    };
    (cuStreamEndCapture) => {
        sys::PFN_cuStreamEndCapture
    };
    (cuStreamIsCapturing) => {
        sys::PFN_cuStreamIsCapturing
    };
    (cuStreamGetCaptureInfo) => {
        sys::PFN_cuStreamGetCaptureInfo
    };
    (cuThreadExchangeStreamCaptureMode) => {
        sys::PFN_cuThreadExchangeStreamCaptureMode
    };
    (cuEventCreate) => {
        sys::PFN_cuEventCreate
    };
    (cuEventDestroy) => {
        sys::PFN_cuEventDestroy
    };
    (cuEventRecord) => {
        sys::PFN_cuEventRecord
    };
    (cuEventQuery) => {
        sys::PFN_cuEventQuery
    };
    (cuEventSynchronize) => {
        sys::PFN_cuEventSynchronize
    };
    (cuEventElapsedTime) => {
        sys::PFN_cuEventElapsedTime
    };
    (cuMemAlloc) => {
        sys::PFN_cuMemAlloc
    };
    (cuMemFree) => {
        sys::PFN_cuMemFree
    };
    (cuMemAllocManaged) => {
        sys::PFN_cuMemAllocManaged
    };
    (cuMemHostAlloc) => {
        sys::PFN_cuMemHostAlloc
    };
    (cuMemFreeHost) => {
        sys::PFN_cuMemFreeHost
    };
    (cuMemHostGetDevicePointer) => {
        sys::PFN_cuMemHostGetDevicePointer
    };
    (cuMemGetInfo) => {
        sys::PFN_cuMemGetInfo
    };
    (cuMemcpyHtoDAsync) => {
        sys::PFN_cuMemcpyHtoDAsync
    };
    (cuMemcpyDtoHAsync) => {
        sys::PFN_cuMemcpyDtoHAsync
    };
    (cuMemcpyDtoDAsync) => {
        sys::PFN_cuMemcpyDtoDAsync
    };
    (cuMemsetD8Async) => {
        sys::PFN_cuMemsetD8Async
    };
    (cuMemsetD32Async) => {
        sys::PFN_cuMemsetD32Async
    };
    (cuMemAllocAsync) => {
        sys::PFN_cuMemAllocAsync
    };
    (cuMemAllocFromPoolAsync) => {
        sys::PFN_cuMemAllocFromPoolAsync
    };
    (cuMemFreeAsync) => {
        sys::PFN_cuMemFreeAsync
    };
    (cuMemPoolSetAttribute) => {
        sys::PFN_cuMemPoolSetAttribute
    };
    (cuMemPoolGetAttribute) => {
        sys::PFN_cuMemPoolGetAttribute
    };
    (cuMemPoolTrimTo) => {
        sys::PFN_cuMemPoolTrimTo
    };
    (cuModuleLoadData) => {
        sys::PFN_cuModuleLoadData
    };
    (cuModuleLoadDataEx) => {
        sys::PFN_cuModuleLoadDataEx
    };
    (cuModuleUnload) => {
        sys::PFN_cuModuleUnload
    };
    (cuModuleGetFunction) => {
        sys::PFN_cuModuleGetFunction
    };
    (cuFuncGetAttribute) => {
        sys::PFN_cuFuncGetAttribute
    };
    (cuFuncSetAttribute) => {
        sys::PFN_cuFuncSetAttribute
    };
    (cuLaunchKernel) => {
        sys::PFN_cuLaunchKernel
    };
    (cuGraphCreate) => {
        sys::PFN_cuGraphCreate
    };
    (cuGraphDestroy) => {
        sys::PFN_cuGraphDestroy
    };
    (cuGraphGetNodes) => {
        sys::PFN_cuGraphGetNodes
    };
    (cuGraphNodeGetType) => {
        sys::PFN_cuGraphNodeGetType
    };
    (cuGraphKernelNodeGetParams) => {
        sys::PFN_cuGraphKernelNodeGetParams
    };
    (cuGraphAddKernelNode) => {
        sys::PFN_cuGraphAddKernelNode
    };
    (cuGraphAddEmptyNode) => {
        sys::PFN_cuGraphAddEmptyNode
    };
    (cuGraphInstantiateWithFlags) => {
        sys::PFN_cuGraphInstantiateWithFlags
    };
    (cuGraphExecDestroy) => {
        sys::PFN_cuGraphExecDestroy
    };
    (cuGraphLaunch) => {
        sys::PFN_cuGraphLaunch
    };
    (cuGraphUpload) => {
        sys::PFN_cuGraphUpload
    };
    (cuGraphExecKernelNodeSetParams) => {
        sys::PFN_cuGraphExecKernelNodeSetParams
    };
    (cuGraphExecUpdate) => {
        sys::PFN_cuGraphExecUpdate
    };
    (cuGraphDebugDotPrint) => {
        sys::PFN_cuGraphDebugDotPrint
    };
    (cuGraphAddDependencies) => {
        sys::PFN_cuGraphAddDependencies
    };
    (cuFuncGetParamInfo) => {
        sys::PFN_cuFuncGetParamInfo
    };
}

driver_table! {
    required {
        cuInit @ ABI_VERSION,
        cuDriverGetVersion @ ABI_VERSION,
        cuGetErrorName @ ABI_VERSION,
        cuGetErrorString @ ABI_VERSION,
        cuDeviceGetCount @ ABI_VERSION,
        cuDeviceGet @ ABI_VERSION,
        cuDeviceGetName @ ABI_VERSION,
        cuDeviceTotalMem @ ABI_VERSION,
        cuDeviceGetAttribute @ ABI_VERSION,
        cuDeviceGetDefaultMemPool @ ABI_VERSION,
        cuDevicePrimaryCtxRetain @ ABI_VERSION,
        cuDevicePrimaryCtxRelease @ ABI_VERSION,
        cuCtxSetCurrent @ ABI_VERSION,
        cuCtxSynchronize @ ABI_VERSION,
        cuCtxGetStreamPriorityRange @ ABI_VERSION,
        cuStreamCreate @ ABI_VERSION,
        cuStreamCreateWithPriority @ ABI_VERSION,
        cuStreamDestroy @ ABI_VERSION,
        cuStreamSynchronize @ ABI_VERSION,
        cuStreamQuery @ ABI_VERSION,
        cuStreamWaitEvent @ ABI_VERSION,
        cuStreamGetFlags @ ABI_VERSION,
        cuStreamGetPriority @ ABI_VERSION,
        cuStreamGetId @ ABI_VERSION,
        cuLaunchHostFunc @ ABI_VERSION,
        cuStreamAddCallback @ ABI_VERSION,
        cuStreamCopyAttributes @ ABI_VERSION,
        cuStreamGetAttribute @ ABI_VERSION,
        cuStreamSetAttribute @ ABI_VERSION,
        cuStreamAttachMemAsync @ ABI_VERSION,
        cuStreamWriteValue32 @ ABI_VERSION,
        cuStreamWriteValue64 @ ABI_VERSION,
        cuStreamWaitValue32 @ ABI_VERSION,
        cuStreamWaitValue64 @ ABI_VERSION,
        cuStreamBatchMemOp @ ABI_VERSION,
        cuStreamBeginCapture @ ABI_VERSION,
        cuStreamEndCapture @ ABI_VERSION,
        cuStreamGetCaptureInfo @ ABI_VERSION,
        cuThreadExchangeStreamCaptureMode @ ABI_VERSION,
        cuEventCreate @ ABI_VERSION,
        cuEventDestroy @ ABI_VERSION,
        cuEventRecord @ ABI_VERSION,
        cuEventQuery @ ABI_VERSION,
        cuEventSynchronize @ ABI_VERSION,
        cuEventElapsedTime @ ABI_VERSION,
        cuMemAlloc @ ABI_VERSION,
        cuMemFree @ ABI_VERSION,
        cuMemAllocManaged @ ABI_VERSION,
        cuMemHostAlloc @ ABI_VERSION,
        cuMemFreeHost @ ABI_VERSION,
        cuMemHostGetDevicePointer @ ABI_VERSION,
        cuMemGetInfo @ ABI_VERSION,
        cuMemcpyHtoDAsync @ ABI_VERSION,
        cuMemcpyDtoHAsync @ ABI_VERSION,
        cuMemcpyDtoDAsync @ ABI_VERSION,
        cuMemsetD8Async @ ABI_VERSION,
        cuMemsetD32Async @ ABI_VERSION,
        cuMemAllocAsync @ ABI_VERSION,
        cuMemAllocFromPoolAsync @ ABI_VERSION,
        cuMemFreeAsync @ ABI_VERSION,
        cuMemPoolSetAttribute @ ABI_VERSION,
        cuMemPoolGetAttribute @ ABI_VERSION,
        cuMemPoolTrimTo @ ABI_VERSION,
        cuModuleLoadDataEx @ ABI_VERSION,
        cuModuleUnload @ ABI_VERSION,
        cuModuleGetFunction @ ABI_VERSION,
        cuFuncGetAttribute @ ABI_VERSION,
        cuFuncSetAttribute @ ABI_VERSION,
        cuLaunchKernel @ ABI_VERSION,
        cuGraphCreate @ ABI_VERSION,
        cuGraphDestroy @ ABI_VERSION,
        cuGraphGetNodes @ ABI_VERSION,
        cuGraphNodeGetType @ ABI_VERSION,
        cuGraphKernelNodeGetParams @ ABI_VERSION,
        cuGraphAddKernelNode @ ABI_VERSION,
        cuGraphAddEmptyNode @ ABI_VERSION,
        cuGraphInstantiateWithFlags @ ABI_VERSION,
        cuGraphExecDestroy @ ABI_VERSION,
        cuGraphLaunch @ ABI_VERSION,
        cuGraphUpload @ ABI_VERSION,
        cuGraphExecKernelNodeSetParams @ ABI_VERSION,
        cuGraphExecUpdate @ ABI_VERSION,
        cuGraphDebugDotPrint @ ABI_VERSION,
        cuGraphAddDependencies @ ABI_VERSION,
    }
    optional {
        // CUDA 12.8.
        cuStreamGetDevice @ 12080,
        // CUDA 12.4.
        cuFuncGetParamInfo @ 12040,
    }
}

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
        Err(crate::error::DriverError {
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
                    reason: e.to_string(),
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
            return Err(crate::error::DriverError::with_driver(&driver, "cuInit", init).into());
        }
        tracing::debug!(path, version = %version_text(driver.version), "loaded the CUDA driver");
        return Ok(driver);
    }
    Err(Error::DriverNotFound { tried })
}

static DRIVER: OnceLock<Result<Driver>> = OnceLock::new();

/// The process's driver table, loaded on first use. A failure is cached and returned again.
pub(crate) fn driver() -> Result<&'static Driver> {
    DRIVER
        .get_or_init(|| {
            let override_path = std::env::var(DRIVER_PATH_ENV).ok();
            load_from(&candidate_paths(override_path.as_deref()))
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

impl crate::error::DriverError {
    /// Like `new`, for use while the table is being built and not yet in the `OnceLock`.
    fn with_driver(d: &Driver, call: &'static str, code: CUresult) -> Self {
        let (name, description) = describe_with(d, code);
        crate::error::DriverError {
            call,
            code,
            name,
            description,
        }
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
