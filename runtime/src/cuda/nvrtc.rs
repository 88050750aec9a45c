//! NVRTC: compiling CUDA C++ source to PTX at run time (feature `nvrtc`).
//!
//! The library is opened on first use with `libloading`, like the driver: the path in
//! [`NVRTC_PATH_ENV`] if set, else [`DEFAULT_NVRTC_PATHS`] in order. A missing library is
//! [`Error::Unsupported`] naming every path tried; a failed compilation is
//! [`Error::InvalidArgument`] carrying the compiler's log.
//!
//! ```no_run
//! # fn main() -> gpu_pipeline::Result<()> {
//! let ptx = gpu_pipeline::nvrtc::compile_ptx(
//!     r#"extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }"#,
//!     &["--gpu-architecture=compute_75"],
//! )?;
//! let ctx = gpu_pipeline::Context::cuda(0)?;
//! let module = gpu_pipeline::Module::load_ptx(&ctx, &ptx)?;
//! # Ok(()) }
//! ```

use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::OnceLock;

use libloading::Library;

use crate::error::{Error, LibraryAttempt, Result};

/// The environment variable that overrides the NVRTC library's path.
pub const NVRTC_PATH_ENV: &str = "GPU_PIPELINE_LIBNVRTC";

/// The library names tried, in order, when [`NVRTC_PATH_ENV`] is unset.
pub const DEFAULT_NVRTC_PATHS: [&str; 3] = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// `nvrtcResult`: 0 is success.
type NvrtcResult = c_int;
/// `nvrtcProgram`.
type Program = *mut std::ffi::c_void;

/// `NVRTC_ERROR_COMPILATION`.
const NVRTC_ERROR_COMPILATION: NvrtcResult = 6;

type PfnVersion = unsafe extern "C" fn(major: *mut c_int, minor: *mut c_int) -> NvrtcResult;
type PfnGetErrorString = unsafe extern "C" fn(result: NvrtcResult) -> *const c_char;
type PfnCreateProgram = unsafe extern "C" fn(
    prog: *mut Program,
    src: *const c_char,
    name: *const c_char,
    num_headers: c_int,
    headers: *const *const c_char,
    include_names: *const *const c_char,
) -> NvrtcResult;
type PfnDestroyProgram = unsafe extern "C" fn(prog: *mut Program) -> NvrtcResult;
type PfnCompileProgram = unsafe extern "C" fn(
    prog: Program,
    num_options: c_int,
    options: *const *const c_char,
) -> NvrtcResult;
type PfnGetSize = unsafe extern "C" fn(prog: Program, size: *mut usize) -> NvrtcResult;
type PfnGetBytes = unsafe extern "C" fn(prog: Program, out: *mut c_char) -> NvrtcResult;

/// A loaded NVRTC library.
///
/// ```
/// use gpu_pipeline::nvrtc::{self, DEFAULT_NVRTC_PATHS};
/// match nvrtc::nvrtc() {
///     Ok(nvrtc) => {
///         let (major, _minor) = nvrtc.version();
///         assert!(major >= 12);
///         let source =
///             r#"extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }"#;
///         let ptx = nvrtc.compile_ptx("twice.cu", source, &["--gpu-architecture=compute_75"])?;
///         assert!(ptx.contains(".entry twice"), "{ptx}");
///         // A compile error carries the compiler's log.
///         let bad = "__global__ void f() { nope; }";
///         let err = nvrtc.compile_ptx("bad.cu", bad, &[]).unwrap_err();
///         assert!(err.to_string().contains("nope"), "{err}");
///     }
///     // No NVRTC here (the CPU backend needs none): the error names every path tried.
///     Err(err) => {
///         assert!(DEFAULT_NVRTC_PATHS.iter().all(|p| err.to_string().contains(p)), "{err}")
///     }
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub struct Nvrtc {
    version: (i32, i32),
    get_error_string: PfnGetErrorString,
    create_program: PfnCreateProgram,
    destroy_program: PfnDestroyProgram,
    compile_program: PfnCompileProgram,
    get_log_size: PfnGetSize,
    get_log: PfnGetBytes,
    get_ptx_size: PfnGetSize,
    get_ptx: PfnGetBytes,
    get_cubin_size: PfnGetSize,
    get_cubin: PfnGetBytes,
    // Keeps the library mapped while the pointers above are used.
    _library: Library,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// The library paths to try: the override alone when set, else the defaults.
pub(crate) fn candidate_paths(override_path: Option<&str>) -> Vec<String> {
    match override_path {
        Some(path) if !path.is_empty() => vec![path.to_owned()],
        _ => DEFAULT_NVRTC_PATHS
            .iter()
            .map(|p| (*p).to_owned())
            .collect(),
    }
}

impl Nvrtc {
    /// Opens the first loadable library among `paths`.
    pub fn load_from(paths: &[String]) -> Result<Nvrtc> {
        let mut tried = Vec::new();
        for path in paths {
            // SAFETY: loading NVRTC runs its initialisers, which have no preconditions.
            match unsafe { Library::new(path) } {
                Ok(library) => return Nvrtc::resolve(library),
                Err(e) => tried.push(LibraryAttempt {
                    path: path.clone(),
                    reason: e.to_string(),
                }),
            }
        }
        Err(Error::Unsupported {
            symbol: "nvrtc",
            reason: format!(
                "no NVRTC library could be loaded (set {NVRTC_PATH_ENV} to its path); tried {}",
                tried
                    .iter()
                    .map(|a| format!("`{}` ({})", a.path, a.reason))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }

    fn resolve(library: Library) -> Result<Nvrtc> {
        fn get<T: Copy>(library: &Library, name: &'static str) -> Result<T> {
            let symbol = format!("{name}\0");
            // SAFETY: each `T` below is the C signature NVRTC's header declares for `name`.
            unsafe { library.get::<T>(symbol.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| Error::Unsupported {
                    symbol: name,
                    reason: format!("the NVRTC library does not export it ({e})"),
                })
        }
        let version_fn: PfnVersion = get(&library, "nvrtcVersion")?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: valid out-pointers.
        unsafe { version_fn(&mut major, &mut minor) };
        Ok(Nvrtc {
            version: (major, minor),
            get_error_string: get(&library, "nvrtcGetErrorString")?,
            create_program: get(&library, "nvrtcCreateProgram")?,
            destroy_program: get(&library, "nvrtcDestroyProgram")?,
            compile_program: get(&library, "nvrtcCompileProgram")?,
            get_log_size: get(&library, "nvrtcGetProgramLogSize")?,
            get_log: get(&library, "nvrtcGetProgramLog")?,
            get_ptx_size: get(&library, "nvrtcGetPTXSize")?,
            get_ptx: get(&library, "nvrtcGetPTX")?,
            get_cubin_size: get(&library, "nvrtcGetCUBINSize")?,
            get_cubin: get(&library, "nvrtcGetCUBIN")?,
            _library: library,
        })
    }

    /// NVRTC's `(major, minor)` version.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    fn error(&self, call: &'static str, code: NvrtcResult) -> Error {
        // SAFETY: NVRTC returns a static string for any code.
        let text = unsafe { (self.get_error_string)(code) };
        let text = if text.is_null() {
            format!("NVRTC error {code}")
        } else {
            // SAFETY: non-null, NUL-terminated and static.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        };
        Error::invalid(call, text)
    }

    /// Compiles `source` (named `name` in diagnostics) with `options` (e.g.
    /// `--gpu-architecture=compute_75`, `-default-device`) and returns the PTX. A failed
    /// compilation is an error whose message holds the compiler's log.
    pub fn compile_ptx(&self, name: &str, source: &str, options: &[&str]) -> Result<String> {
        let ptx = self.compile(name, source, options, self.get_ptx_size, self.get_ptx)?;
        Ok(String::from_utf8_lossy(until_nul(&ptx)).into_owned())
    }

    /// Like [`Nvrtc::compile_ptx`] for a real architecture (`--gpu-architecture=sm_90`),
    /// returning the cubin, for [`Module::load_cubin`](crate::Module::load_cubin).
    pub fn compile_cubin(&self, name: &str, source: &str, options: &[&str]) -> Result<Vec<u8>> {
        self.compile(name, source, options, self.get_cubin_size, self.get_cubin)
    }

    fn compile(
        &self,
        name: &str,
        source: &str,
        options: &[&str],
        size_fn: PfnGetSize,
        bytes_fn: PfnGetBytes,
    ) -> Result<Vec<u8>> {
        const CALL: &str = "nvrtc::compile";
        let nul = |what: &str| Error::invalid(CALL, format!("the {what} contains a NUL byte"));
        let csource = CString::new(source).map_err(|_| nul("source"))?;
        let cname = CString::new(name).map_err(|_| nul("program name"))?;
        let coptions = options
            .iter()
            .map(|o| CString::new(*o).map_err(|_| nul("option")))
            .collect::<Result<Vec<_>>>()?;
        let option_ptrs: Vec<*const c_char> = coptions.iter().map(|o| o.as_ptr()).collect();

        // The library's own header, so that a kernel compiled here can
        // `#include "gpu_pipeline_condition.cuh"` to set a condition.
        let header =
            CString::new(crate::vocab::condition::CONDITION_HEADER).map_err(|_| nul("header"))?;
        let header_name = c"gpu_pipeline_condition.cuh";
        let headers = [header.as_ptr()];
        let header_names = [header_name.as_ptr()];
        let mut program: Program = std::ptr::null_mut();
        // SAFETY: valid C strings and an out-pointer; one header and its name, C strings
        // that outlive the call.
        let code = unsafe {
            (self.create_program)(
                &mut program,
                csource.as_ptr(),
                cname.as_ptr(),
                1,
                headers.as_ptr(),
                header_names.as_ptr(),
            )
        };
        if code != 0 {
            return Err(self.error("nvrtcCreateProgram", code));
        }
        let program = ProgramGuard {
            nvrtc: self,
            raw: program,
        };
        // SAFETY: a live program and `option_ptrs.len()` valid C strings.
        let code = unsafe {
            (self.compile_program)(
                program.raw,
                option_ptrs.len() as c_int,
                option_ptrs.as_ptr(),
            )
        };
        let log = self.read(program.raw, self.get_log_size, self.get_log)?;
        let log = String::from_utf8_lossy(until_nul(&log)).trim().to_owned();
        if code != 0 {
            let reason = if code == NVRTC_ERROR_COMPILATION {
                "compilation failed".to_owned()
            } else {
                self.error("nvrtcCompileProgram", code).to_string()
            };
            return Err(Error::invalid(
                "nvrtc::compile",
                format!("`{name}`: {reason}; compiler log:\n{log}"),
            ));
        }
        if !log.is_empty() {
            tracing::debug!(program = name, %log, "NVRTC log");
        }
        self.read(program.raw, size_fn, bytes_fn)
    }

    fn read(
        &self,
        program: Program,
        size_fn: PfnGetSize,
        bytes_fn: PfnGetBytes,
    ) -> Result<Vec<u8>> {
        let mut size = 0;
        // SAFETY: a live program and a valid out-pointer.
        let code = unsafe { size_fn(program, &mut size) };
        if code != 0 {
            return Err(self.error("nvrtc::compile", code));
        }
        let mut bytes = vec![0u8; size];
        // SAFETY: the buffer holds the `size` bytes NVRTC said it will write.
        let code = unsafe { bytes_fn(program, bytes.as_mut_ptr().cast()) };
        if code != 0 {
            return Err(self.error("nvrtc::compile", code));
        }
        Ok(bytes)
    }
}

/// Destroys a program on every path out of `compile`.
struct ProgramGuard<'a> {
    nvrtc: &'a Nvrtc,
    raw: Program,
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: a program we created and destroy once.
        unsafe { (self.nvrtc.destroy_program)(&mut self.raw) };
    }
}

fn until_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

static NVRTC: OnceLock<Result<Nvrtc>> = OnceLock::new();

/// The process's NVRTC library, loaded on first use. A failure is cached and returned again.
pub fn nvrtc() -> Result<&'static Nvrtc> {
    NVRTC
        .get_or_init(|| {
            let override_path = std::env::var(NVRTC_PATH_ENV).ok();
            Nvrtc::load_from(&candidate_paths(override_path.as_deref()))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Compiles CUDA C++ `source` to PTX with the process's NVRTC (see [`Nvrtc::compile_ptx`]).
pub fn compile_ptx(source: &str, options: &[&str]) -> Result<String> {
    nvrtc()?.compile_ptx("source.cu", source, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_unsupported_naming_every_path() {
        let err = Nvrtc::load_from(&[
            "/nonexistent/libnvrtc.so.13".to_owned(),
            "libnvrtc-bogus.so".to_owned(),
        ])
        .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(
                err,
                Error::Unsupported {
                    symbol: "nvrtc",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(text.contains("/nonexistent/libnvrtc.so.13"), "{text}");
        assert!(text.contains("libnvrtc-bogus.so"), "{text}");
        assert!(text.contains(NVRTC_PATH_ENV), "{text}");
    }

    /// Where `tools/build-ptx` keeps NVRTC (absent until it ran on this machine).
    fn wheel_nvrtc() -> Option<Nvrtc> {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/build-ptx/nvrtc-12.0.140"
        );
        let path = format!("{dir}/libnvrtc.so.12");
        if !std::path::Path::new(&path).exists() {
            println!("skipped: {path} is absent (run tools/build-ptx once)");
            return None;
        }
        Nvrtc::load_from(&[path]).ok()
    }

    #[test]
    fn a_kernel_may_include_the_condition_header() {
        let Some(nvrtc) = wheel_nvrtc() else {
            return;
        };
        let source = r#"
            #include "gpu_pipeline_condition.cuh"
            extern "C" __global__ void decide(const unsigned* v, gp_condition go)
            {
                if (threadIdx.x == 0) gp_set_condition(go, v[0]);
            }
        "#;
        let text = nvrtc
            .compile_ptx("decide.cu", source, &["--gpu-architecture=compute_75"])
            .expect("compiles with the header");
        assert!(text.contains("cudaGraphSetConditional"), "{text}");
        assert!(text.contains(".b8 decide_param_1[32]"), "{text}");
    }

    #[test]
    fn an_override_path_is_the_only_path_tried() {
        assert_eq!(
            candidate_paths(Some("/opt/nvrtc.so")),
            vec!["/opt/nvrtc.so"]
        );
        assert_eq!(candidate_paths(Some("")).len(), 3);
        assert_eq!(candidate_paths(None)[0], "libnvrtc.so.13");
    }

    #[test]
    fn a_library_that_is_not_nvrtc_is_unsupported() {
        let err = Nvrtc::load_from(&["libc.so.6".to_owned()]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unsupported {
                    symbol: "nvrtcVersion",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    /// Runs where NVRTC is installed (or `GPU_PIPELINE_LIBNVRTC` points at it); no GPU needed.
    #[test]
    fn compiles_ptx_and_reports_the_log_of_a_broken_source() {
        let Ok(nvrtc) = nvrtc() else {
            eprintln!("skipped: no NVRTC library");
            return;
        };
        let ptx = nvrtc
            .compile_ptx(
                "twice.cu",
                r#"extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }"#,
                &["--gpu-architecture=compute_75"],
            )
            .unwrap();
        assert!(ptx.contains(".entry twice"), "{ptx}");
        let err = nvrtc
            .compile_ptx(
                "broken.cu",
                "extern \"C\" __global__ void f() { undeclared(); }",
                &[],
            )
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("compilation failed"), "{text}");
        assert!(text.contains("undeclared"), "{text}");
    }
}
