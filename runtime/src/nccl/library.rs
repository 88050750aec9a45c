//! Loading NCCL at run time, like the CUDA driver: one function table in a `OnceLock`, opened
//! once; a failure is cached and returned again, never a panic.
//!
//! Where it looks, in order: the path in `GPU_PIPELINE_LIBNCCL` alone when that is set (a
//! wrong override is an error, not a silent fallback); else `libnccl.so.2` and `libnccl.so`
//! through the dynamic loader's search path; then `nvidia/nccl/lib/libnccl.so.2` (where the
//! `nvidia-nccl-cu12`/`-cu13` wheels put it) under the Python package directories found
//! without running Python ([`python_package_dirs`]).

use std::ffi::{CStr, OsStr, OsString, c_char, c_int};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::Library;

use super::sys::{self, ncclResult_t};
use crate::error::{Error, LibraryAttempt, Result};

/// The environment variable that names the NCCL library to load (and nothing else is tried).
pub const NCCL_PATH_ENV: &str = "GPU_PIPELINE_LIBNCCL";

/// The names tried through the dynamic loader when [`NCCL_PATH_ENV`] is unset.
pub const DEFAULT_NCCL_NAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

/// Where the NCCL wheels put the library, under a Python package directory.
pub const WHEEL_LIBRARY: &str = "nvidia/nccl/lib/libnccl.so.2";

/// Declares the function table: required entry points fail the load when missing; optional
/// ones are `None`.
macro_rules! nccl_table {
    (
        required { $($name:ident: $ty:ident,)* }
        optional { $($oname:ident: $oty:ident,)* }
    ) => {
        /// The loaded NCCL: its version, where it came from, and every entry point we call.
        #[allow(non_snake_case)]
        pub(crate) struct Nccl {
            /// `ncclGetVersion`, e.g. 23102 for 2.31.2.
            pub(crate) version: i32,
            /// The path or name it was loaded from.
            pub(crate) path: String,
            $(pub(crate) $name: sys::$ty,)*
            $(pub(crate) $oname: Option<sys::$oty>,)*
            // Keeps the library mapped for as long as the pointers above are used: forever.
            _library: Library,
        }

        impl Nccl {
            /// Looks every entry point up by name.
            ///
            /// # Safety
            /// `library` must be an NCCL 2 library, whose exports have the signatures `sys`
            /// declares.
            #[allow(non_snake_case)]
            unsafe fn resolve(library: Library, path: &str) -> std::result::Result<Nccl, String> {
                $(
                    // SAFETY: the caller vouches that this is NCCL 2, whose export of this name
                    // has the signature `sys` declares (checked against nccl.h).
                    let $name: sys::$ty = *unsafe {
                        library.get::<sys::$ty>(concat!(stringify!($name), "\0").as_bytes())
                    }
                    .map_err(|_| format!("it does not export `{}`", stringify!($name)))?;
                )*
                $(
                    // SAFETY: as above.
                    let $oname: Option<sys::$oty> = unsafe {
                        library.get::<sys::$oty>(concat!(stringify!($oname), "\0").as_bytes())
                    }
                    .ok()
                    .map(|f| *f);
                )*
                let mut nccl = Nccl {
                    version: 0,
                    path: path.to_owned(),
                    $($name,)*
                    $($oname,)*
                    _library: library,
                };
                let mut version: c_int = 0;
                // SAFETY: a valid out-pointer; ncclGetVersion has no other precondition.
                let code = unsafe { (nccl.ncclGetVersion)(&mut version) };
                if !code.is_success() {
                    return Err(format!("ncclGetVersion failed with code {}", code.0));
                }
                nccl.version = version;
                Ok(nccl)
            }
        }
    };
}

nccl_table! {
    required {
        ncclGetVersion: PFN_ncclGetVersion,
        ncclGetUniqueId: PFN_ncclGetUniqueId,
        ncclCommInitRank: PFN_ncclCommInitRank,
        ncclCommDestroy: PFN_ncclCommDestroy,
        ncclCommAbort: PFN_ncclCommAbort,
        ncclCommGetAsyncError: PFN_ncclCommGetAsyncError,
        ncclCommCount: PFN_ncclCommCount,
        ncclCommCuDevice: PFN_ncclCommCuDevice,
        ncclCommUserRank: PFN_ncclCommUserRank,
        ncclGetErrorString: PFN_ncclGetErrorString,
        ncclGroupStart: PFN_ncclGroupStart,
        ncclGroupEnd: PFN_ncclGroupEnd,
        ncclSend: PFN_ncclSend,
        ncclRecv: PFN_ncclRecv,
        ncclAllReduce: PFN_ncclAllReduce,
        ncclBroadcast: PFN_ncclBroadcast,
        ncclAllGather: PFN_ncclAllGather,
        ncclReduceScatter: PFN_ncclReduceScatter,
    }
    optional {
        ncclCommInitRankConfig: PFN_ncclCommInitRankConfig,
        ncclGetLastError: PFN_ncclGetLastError,
    }
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl")
            .field("version", &self.version)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Nccl {
    /// The error for `code` returned by `call`: NCCL's text for the code and, when NCCL has
    /// one, its last error message (which may belong to an earlier call; NCCL says so too).
    pub(crate) fn error(&self, call: &'static str, code: ncclResult_t) -> Error {
        // SAFETY: ncclGetErrorString takes any code and returns a static string or NULL.
        let text = c_text(unsafe { (self.ncclGetErrorString)(code) });
        let detail = self
            .ncclGetLastError
            // SAFETY: NCCL ignores the communicator argument (NULL is fine) and returns a
            // process-global, NUL-terminated buffer or NULL.
            .and_then(|f| c_text(unsafe { f(std::ptr::null_mut()) }))
            .filter(|d| !d.is_empty());
        let name = code.known_name().unwrap_or("an unknown NCCL result");
        let message = match (text, detail) {
            (Some(text), Some(detail)) => format!("{name}: {text}; last NCCL error: {detail}"),
            (Some(text), None) => format!("{name}: {text}"),
            (None, Some(detail)) => format!("{name}; last NCCL error: {detail}"),
            (None, None) => name.to_owned(),
        };
        Error::Nccl {
            call,
            code: code.0,
            message,
        }
    }

    /// Turns a result into a `Result`, naming the call on failure.
    pub(crate) fn check(&self, call: &'static str, code: ncclResult_t) -> Result<()> {
        if code.is_success() {
            Ok(())
        } else {
            Err(self.error(call, code))
        }
    }
}

/// Copies a C string NCCL returned, if any.
fn c_text(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null, and NCCL's strings are NUL-terminated and outlive this call.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// The Python package directories worth looking in for the NCCL wheel, found cheaply: no
/// Python is run. In order: `PYTHONPATH`'s entries; the `site-packages` of `VIRTUAL_ENV` and
/// `CONDA_PREFIX`; of every `python3` on `PATH` (its `bin/`'s sibling `lib/python3.*/`, so
/// virtual environments count); of the user (`~/.local`); and of the usual prefixes
/// (`/usr/local`, `/usr`, `/opt/*`, `/opt/*/.venv`, `/opt/*/venv`). Only existing
/// directories, each once.
///
/// ```
/// for dir in gpu_pipeline::nccl::python_package_dirs() {
///     assert!(dir.is_dir(), "{}", dir.display()); // only directories that exist
/// }
/// ```
pub fn python_package_dirs() -> Vec<PathBuf> {
    python_package_dirs_from(|name| std::env::var_os(name), Path::new("/"))
}

/// [`python_package_dirs`] over any variable lookup and file-system root (for tests).
pub(crate) fn python_package_dirs_from(
    get: impl Fn(&str) -> Option<OsString>,
    root: &Path,
) -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(paths) = get("PYTHONPATH") {
        dirs.extend(std::env::split_paths(&paths).filter(|p| !p.as_os_str().is_empty()));
    }
    for name in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = get(name).filter(|p| !p.is_empty()) {
            prefixes.push(PathBuf::from(prefix));
        }
    }
    if let Some(path) = get("PATH") {
        for bin in std::env::split_paths(&path) {
            // Not canonicalized: a venv's python3 links to the system's, but its packages
            // are the venv's.
            if bin.join("python3").exists()
                && let Some(prefix) = bin.parent()
            {
                prefixes.push(prefix.to_path_buf());
            }
        }
    }
    if let Some(home) = get("HOME").filter(|h| !h.is_empty()) {
        prefixes.push(PathBuf::from(home).join(".local"));
    }
    prefixes.push(root.join("usr/local"));
    prefixes.push(root.join("usr"));
    for opt in subdirs(&root.join("opt")) {
        prefixes.push(opt.join(".venv"));
        prefixes.push(opt.join("venv"));
        prefixes.push(opt);
    }
    for prefix in prefixes {
        let lib = prefix.join("lib");
        for python in subdirs(&lib).into_iter().filter(|d| {
            d.file_name()
                .and_then(OsStr::to_str)
                .is_some_and(|n| n.starts_with("python3"))
        }) {
            dirs.push(python.join("site-packages"));
            dirs.push(python.join("dist-packages"));
        }
    }
    dirs.push(root.join("usr/lib/python3/dist-packages"));
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| d.is_dir() && seen.insert(d.clone()));
    dirs
}

/// The subdirectories of `dir`, sorted (none when it cannot be read).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// What to try: the override alone when set; else the default names, then the wheel's library
/// under each of `python_dirs` that has it. The second value lists the package directories
/// searched without finding it, for the error.
pub(crate) fn candidates(
    override_path: Option<&str>,
    python_dirs: &[PathBuf],
) -> (Vec<String>, Vec<PathBuf>) {
    if let Some(path) = override_path.filter(|p| !p.is_empty()) {
        return (vec![path.to_owned()], Vec::new());
    }
    let mut paths: Vec<String> = DEFAULT_NCCL_NAMES.iter().map(|p| (*p).to_owned()).collect();
    let mut searched = Vec::new();
    for dir in python_dirs {
        let lib = dir.join(WHEEL_LIBRARY);
        if lib.is_file() {
            paths.push(lib.to_string_lossy().into_owned());
        } else {
            searched.push(dir.clone());
        }
    }
    (paths, searched)
}

/// The library paths tried when NCCL is first used, in order (the override alone when it
/// is set).
///
/// ```
/// use gpu_pipeline::nccl::{DEFAULT_NCCL_NAMES, NCCL_PATH_ENV, candidate_paths};
/// let paths = candidate_paths();
/// if std::env::var_os(NCCL_PATH_ENV).is_none() {
///     // The usual names through the loader's search first, then copies in Python wheels.
///     assert!(paths.starts_with(&DEFAULT_NCCL_NAMES.map(String::from)), "{paths:?}");
/// }
/// ```
pub fn candidate_paths() -> Vec<String> {
    let override_path = std::env::var(NCCL_PATH_ENV).ok();
    candidates(override_path.as_deref(), &python_package_dirs()).0
}

/// Opens the first usable NCCL among `paths`; `searched` goes into the error as one more
/// attempt ("no wheel under ...").
pub(crate) fn load_from(paths: &[String], searched: &[PathBuf]) -> Result<Nccl> {
    let mut tried = Vec::new();
    for path in paths {
        // SAFETY: loading NCCL runs its initialisers, which have no preconditions (it
        // links the CUDA runtime statically and finds the driver lazily).
        let library = match unsafe { Library::new(path) } {
            Ok(library) => library,
            Err(e) => {
                // libloading's message is "dlopen failed"; the loader's own text is its source.
                let reason = match std::error::Error::source(&e) {
                    Some(source) => source.to_string(),
                    None => e.to_string(),
                };
                tried.push(LibraryAttempt {
                    path: path.clone(),
                    reason,
                });
                continue;
            }
        };
        // SAFETY: a library named like NCCL; `resolve` checks every symbol exists and calls
        // only ncclGetVersion, whose signature every NCCL 2 shares.
        match unsafe { Nccl::resolve(library, path) } {
            Ok(nccl) => {
                tracing::debug!(path, version = nccl.version, "loaded NCCL");
                return Ok(nccl);
            }
            Err(reason) => tried.push(LibraryAttempt {
                path: path.clone(),
                reason: format!("not a usable NCCL (2.7.3 or newer): {reason}"),
            }),
        }
    }
    if !searched.is_empty() {
        let dirs: Vec<String> = searched.iter().map(|d| d.display().to_string()).collect();
        tried.push(LibraryAttempt {
            path: format!("<python packages>/{WHEEL_LIBRARY}"),
            reason: format!(
                "not present under {}; `pip install nvidia-nccl-cu13` provides it",
                dirs.join(", ")
            ),
        });
    }
    Err(Error::NcclNotFound { tried })
}

static NCCL: OnceLock<Result<Nccl>> = OnceLock::new();

/// The process's NCCL, loaded on first use. A failure is cached and returned again.
pub(crate) fn nccl() -> Result<&'static Nccl> {
    NCCL.get_or_init(|| {
        let override_path = std::env::var(NCCL_PATH_ENV).ok();
        let dirs = if override_path.as_deref().is_some_and(|p| !p.is_empty()) {
            Vec::new()
        } else {
            python_package_dirs()
        };
        let (paths, searched) = candidates(override_path.as_deref(), &dirs);
        load_from(&paths, &searched)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// A NCCL version, decoded from `NCCL_VERSION_CODE`.
///
/// ```
/// use gpu_pipeline::nccl::{self, NcclVersion};
/// let v = NcclVersion::from_code(22703); // NCCL 2.27.3
/// assert_eq!((v.major, v.minor, v.patch), (2, 27, 3));
/// assert_eq!(v.to_string(), "2.27.3");
/// assert!(NcclVersion::from_code(2804) < v); // 2.8.4, the older encoding
/// if let Ok(loaded) = nccl::version() {
///     assert_eq!(loaded.major, 2);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NcclVersion {
    /// The major version (2).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
    /// The patch level.
    pub patch: u32,
}

impl NcclVersion {
    /// Decodes `NCCL_VERSION(X,Y,Z)`: `X*1000 + Y*100 + Z` up to 2.8, `X*10000 + Y*100 + Z`
    /// from 2.9 on.
    pub fn from_code(code: i32) -> NcclVersion {
        let code = code.max(0) as u32;
        let (major, rest) = if code >= 10000 {
            (code / 10000, code % 10000)
        } else {
            (code / 1000, code % 1000)
        };
        NcclVersion {
            major,
            minor: rest / 100,
            patch: rest % 100,
        }
    }
}

impl std::fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Whether NCCL loads in this process (loading it if needed).
///
/// ```
/// use gpu_pipeline::nccl;
/// if nccl::is_available() {
///     println!("NCCL {} from {}", nccl::version().unwrap(), nccl::library_path().unwrap());
/// } else {
///     // The error names every path tried and why each failed.
///     assert!(nccl::version().is_err());
/// }
/// ```
pub fn is_available() -> bool {
    nccl().is_ok()
}

/// The loaded NCCL's version.
///
/// ```
/// match gpu_pipeline::nccl::version() {
///     Ok(version) => assert!(version.major >= 2),
///     Err(err) => println!("no NCCL: {err}"),
/// }
/// ```
pub fn version() -> Result<NcclVersion> {
    nccl().map(|n| NcclVersion::from_code(n.version))
}

/// Where the loaded NCCL came from (a path, or a name the dynamic loader resolved).
///
/// ```
/// if let Ok(path) = gpu_pipeline::nccl::library_path() {
///     assert!(path.contains("libnccl"), "{path}");
/// }
/// ```
pub fn library_path() -> Result<&'static str> {
    nccl().map(|n| n.path.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_is_the_only_path_tried() {
        let dirs = [PathBuf::from("/nonexistent")];
        assert_eq!(
            candidates(Some("/opt/nccl/libnccl.so.2"), &dirs).0,
            ["/opt/nccl/libnccl.so.2"]
        );
        let (paths, searched) = candidates(Some(""), &dirs);
        assert_eq!(paths, ["libnccl.so.2", "libnccl.so"]);
        assert_eq!(searched, dirs);
    }

    fn temp_root(name: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("gpu-pipeline-nccl-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        root
    }

    #[test]
    fn python_package_dirs_cover_venvs_path_pythons_and_opt() {
        let root = temp_root("dirs");
        let mk = |p: &str| {
            let d = root.join(p);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let venv_bin = mk("opt/torch/.venv/bin");
        std::fs::write(venv_bin.join("python3"), "").unwrap();
        let venv_site = mk("opt/torch/.venv/lib/python3.12/site-packages");
        let opt_site = mk("opt/conda/lib/python3.11/site-packages");
        let local_dist = mk("usr/local/lib/python3.10/dist-packages");
        let pythonpath = mk("extra/site");
        let user = mk("home/u/.local/lib/python3.12/site-packages");
        mk("usr/local/lib/perl5");
        let env = |name: &str| -> Option<OsString> {
            match name {
                "PATH" => Some(venv_bin.clone().into_os_string()),
                "PYTHONPATH" => Some(pythonpath.clone().into_os_string()),
                "HOME" => Some(root.join("home/u").into_os_string()),
                _ => None,
            }
        };
        let dirs = python_package_dirs_from(env, &root);
        assert_eq!(dirs[0], pythonpath);
        for d in [&venv_site, &opt_site, &local_dist, &user] {
            assert!(dirs.contains(d), "{d:?} not in {dirs:?}");
        }
        // The PATH python's venv comes before the user's and the system's directories.
        let pos = |d: &PathBuf| dirs.iter().position(|x| x == d).unwrap();
        assert!(pos(&venv_site) < pos(&user) && pos(&user) < pos(&local_dist));
        assert_eq!(dirs.len(), 5, "{dirs:?}");

        // A wheel's library in one of them becomes a candidate after the default names.
        let lib = venv_site.join(WHEEL_LIBRARY);
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"not really a library").unwrap();
        let (paths, searched) = candidates(None, &dirs);
        assert_eq!(paths[..2], ["libnccl.so.2", "libnccl.so"]);
        assert_eq!(paths[2], lib.to_string_lossy());
        assert_eq!(searched.len(), 4);

        // Loading it fails, and the error lists every attempt and every directory searched.
        let err = load_from(&paths[2..], &searched).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::NcclNotFound { .. }), "{err:?}");
        assert!(text.contains(&*lib.to_string_lossy()), "{text}");
        assert!(text.contains(&*opt_site.to_string_lossy()), "{text}");
        assert!(text.contains("pip install nvidia-nccl-cu13"), "{text}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_library_that_is_not_nccl_is_named_with_the_missing_symbol() {
        let err = load_from(&["libc.so.6".to_owned()], &[]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("`libc.so.6`") && text.contains("ncclGetVersion"),
            "{text}"
        );
    }

    #[test]
    fn versions_decode_both_encodings() {
        assert_eq!(NcclVersion::from_code(23102).to_string(), "2.31.2");
        assert_eq!(NcclVersion::from_code(2804).to_string(), "2.8.4");
        assert_eq!(NcclVersion::from_code(21000).to_string(), "2.10.0");
        assert!(NcclVersion::from_code(21903) > NcclVersion::from_code(2804));
    }

    #[test]
    fn the_process_nccl_loads_or_lists_what_was_tried() {
        match nccl() {
            Ok(n) => assert!(NcclVersion::from_code(n.version).major >= 2, "{n:?}"),
            Err(Error::NcclNotFound { tried }) => {
                assert!(tried.iter().any(|a| a.path == "libnccl.so.2"), "{tried:?}")
            }
            Err(other) => panic!("{other}"),
        }
    }
}
