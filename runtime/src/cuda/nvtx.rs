//! NVTX ranges for profilers (Nsight Systems, Nsight Compute): each pipeline stage's enqueue
//! (and capture) on the CUDA backend is a range named `Pipeline/stage`, so `nsys`'s timeline
//! shows our names beside the CUDA API calls they issue.
//!
//! No NVTX library is linked or needed. This is NVTX v3's own mechanism, done in Rust: a
//! profiler that wants NVTX events starts the program with `NVTX_INJECTION64_PATH` naming its
//! injection library; on first use we open that library, call its
//! `InitializeInjectionNvtx2` with our export table, and it fills in the function-pointer
//! slots of the NVTX modules it implements (we use the core module's `nvtxRangePushA` and
//! `nvtxRangePop`). Without the variable nothing is loaded and a range costs one check of a
//! `OnceLock`; a library that fails to load or initialise is logged once (`tracing`, DEBUG)
//! and treated as absent.

use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use libloading::Library;

/// The variable a profiler sets to its NVTX injection library.
pub const NVTX_INJECTION_ENV: &str = "NVTX_INJECTION64_PATH";

/// `NVTX_ETID_CALLBACKS`: the export table through which the injection asks for our slots.
const ETID_CALLBACKS: u32 = 1;
/// `NVTX_ETID_VERSIONINFO`.
const ETID_VERSIONINFO: u32 = 3;
/// The NVTX API version we speak.
const NVTX_VERSION: u32 = 3;

/// The callback modules, in `NvtxCallbackModule` order from 1 (core, CUDA, OpenCL, CUDA
/// runtime, core 2, sync), with their slot counts. The injection may ask for any of them.
const MODULE_SIZES: [usize; 6] = [16, 9, 15, 7, 16, 7];
const ALL_SLOTS: usize = 16 + 9 + 15 + 7 + 16 + 7;
/// Slots of the core module (the first): `NVTX_CBID_CORE_RangePushA` and `_RangePop`.
const CORE_RANGE_PUSH_A: usize = 9;
const CORE_RANGE_POP: usize = 11;

/// `NvtxFunctionTable`: an array of pointers to function-pointer slots.
type FunctionTable = *mut *mut *mut c_void;
type RangePushA = unsafe extern "C" fn(message: *const c_char) -> c_int;
type RangePop = unsafe extern "C" fn() -> c_int;
type GetExportTable = unsafe extern "C" fn(etid: u32) -> *const c_void;
type InitializeInjection = unsafe extern "C" fn(get_export_table: GetExportTable) -> c_int;

/// `NvtxExportTableCallbacks`.
#[repr(C)]
struct CallbacksTable {
    struct_size: usize,
    get_module_function_table: unsafe extern "C" fn(
        module: c_int,
        out_table: *mut FunctionTable,
        out_size: *mut c_uint,
    ) -> c_int,
}

/// `NvtxExportTableVersionInfo`.
#[repr(C)]
struct VersionTable {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: unsafe extern "C" fn(version: u32),
}

/// The function-pointer slots the injection fills in, and the table of pointers to them that
/// it receives. Both live in a `static` and are only written during initialisation, which
/// `OnceLock` runs once, before any reader.
struct Slots {
    values: [*mut c_void; ALL_SLOTS],
    pointers: [*mut *mut c_void; ALL_SLOTS],
}

static mut SLOTS: Slots = Slots {
    values: [std::ptr::null_mut(); ALL_SLOTS],
    pointers: [std::ptr::null_mut(); ALL_SLOTS],
};

static CALLBACKS: CallbacksTable = CallbacksTable {
    struct_size: std::mem::size_of::<CallbacksTable>(),
    get_module_function_table,
};

static VERSION: VersionTable = VersionTable {
    struct_size: std::mem::size_of::<VersionTable>(),
    version: NVTX_VERSION,
    reserved0: 0,
    set_injection_nvtx_version,
};

unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

unsafe extern "C" fn get_export_table(etid: u32) -> *const c_void {
    match etid {
        ETID_CALLBACKS => (&raw const CALLBACKS).cast(),
        ETID_VERSIONINFO => (&raw const VERSION).cast(),
        _ => std::ptr::null(),
    }
}

/// Hands the injection the slots of `module` (1-based) and their count; 0 for a module we do
/// not know.
unsafe extern "C" fn get_module_function_table(
    module: c_int,
    out_table: *mut FunctionTable,
    out_size: *mut c_uint,
) -> c_int {
    let Some(index) = usize::try_from(module)
        .ok()
        .and_then(|m| m.checked_sub(1))
        .filter(|&m| m < MODULE_SIZES.len())
    else {
        return 0;
    };
    let start: usize = MODULE_SIZES[..index].iter().sum();
    // SAFETY: called by the injection only from inside `InitializeInjectionNvtx2`, which
    // `load` runs once under the `OnceLock`, after filling `pointers`; nothing reads `SLOTS`
    // concurrently. The out-pointers are the injection's own, valid when non-null.
    unsafe {
        let pointers = &raw mut SLOTS.pointers;
        if !out_table.is_null() {
            *out_table = (*pointers).as_mut_ptr().add(start);
        }
        if !out_size.is_null() {
            *out_size = MODULE_SIZES[index] as c_uint;
        }
    }
    1
}

/// The two entry points, once the injection filled them in.
struct Nvtx {
    push: RangePushA,
    pop: RangePop,
    /// Keeps the injection library loaded for the process's life.
    _library: Library,
}

static NVTX: OnceLock<Option<Nvtx>> = OnceLock::new();

fn nvtx() -> Option<&'static Nvtx> {
    NVTX.get_or_init(|| {
        let path = std::env::var_os(NVTX_INJECTION_ENV).filter(|p| !p.is_empty())?;
        match load(&path) {
            Ok(nvtx) => Some(nvtx),
            Err(reason) => {
                tracing::debug!(path = ?path, %reason, "no NVTX ranges: the injection library did not load");
                None
            }
        }
    })
    .as_ref()
}

/// Opens the injection library and lets it fill our slots.
fn load(path: &std::ffi::OsStr) -> Result<Nvtx, String> {
    // SAFETY: a profiler's injection library; its initialisers have no preconditions.
    let library = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    // SAFETY: NVTX v3's documented entry point of an injection library has this signature.
    let init = unsafe { library.get::<InitializeInjection>(b"InitializeInjectionNvtx2\0") }
        .map_err(|e| e.to_string())?;
    // SAFETY: runs once, inside `NVTX`'s `get_or_init`: nothing else touches `SLOTS` yet.
    let (push, pop) = unsafe { initialize(*init)? };
    Ok(Nvtx {
        push,
        pop,
        _library: library,
    })
}

/// Lets `init` (an injection's `InitializeInjectionNvtx2`) fill our slots, and returns the
/// core module's `nvtxRangePushA` and `nvtxRangePop`.
///
/// # Safety
/// Nothing else may use `SLOTS` meanwhile; `init` must follow NVTX's injection protocol.
unsafe fn initialize(init: InitializeInjection) -> Result<(RangePushA, RangePop), String> {
    // SAFETY: the caller's exclusivity. Each pointer slot points at its value slot; the
    // injection writes through them.
    let (push, pop) = unsafe {
        let slots = &raw mut SLOTS;
        for i in 0..ALL_SLOTS {
            (*slots).values[i] = std::ptr::null_mut();
            (*slots).pointers[i] = &raw mut (*slots).values[i];
        }
        if init(get_export_table) != 1 {
            return Err("InitializeInjectionNvtx2 refused".to_owned());
        }
        (
            (*slots).values[CORE_RANGE_PUSH_A],
            (*slots).values[CORE_RANGE_POP],
        )
    };
    if push.is_null() || pop.is_null() {
        return Err("the injection does not implement nvtxRangePushA/nvtxRangePop".to_owned());
    }
    // SAFETY: the injection stored its implementations of these two core entry points, whose
    // C signatures the types state.
    Ok(unsafe {
        (
            std::mem::transmute::<*mut c_void, RangePushA>(push),
            std::mem::transmute::<*mut c_void, RangePop>(pop),
        )
    })
}

/// Whether a profiler's NVTX injection is loaded (so ranges are recorded).
///
/// ```
/// use gpu_pipeline::nvtx::{NVTX_INJECTION_ENV, is_active};
/// // Only a profiler (`nsys profile ./program`) sets the injection library.
/// if std::env::var_os(NVTX_INJECTION_ENV).is_none() {
///     assert!(!is_active());
/// }
/// ```
pub fn is_active() -> bool {
    nvtx().is_some()
}

/// The name of a stage's NVTX range: `Pipeline/stage`.
///
/// ```
/// assert_eq!(gpu_pipeline::nvtx::stage_range_name("HeatStep", "save"), "HeatStep/save");
/// ```
pub fn stage_range_name(pipeline: &str, stage: &str) -> String {
    format!("{pipeline}/{stage}")
}

/// An open NVTX range on this thread; dropping it closes the range.
///
/// Mark a phase of your own program beside the pipelines' stage ranges:
///
/// ```
/// use gpu_pipeline::nvtx::{self, Range};
/// let mut named = false;
/// {
///     let _io = Range::push(|| {
///         named = true;
///         "checkpoint/write".to_owned()
///     });
///     // ... write the checkpoint: it shows as one range in Nsight Systems ...
/// } // the range closes here
/// assert_eq!(named, nvtx::is_active()); // the name is made only when a profiler listens
/// ```
#[derive(Debug)]
#[must_use = "the range closes when this guard is dropped"]
pub struct Range {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Range {
    /// Opens a range named by `name()` when a profiler listens; `None` (and `name` is never
    /// called) otherwise.
    pub fn push(name: impl FnOnce() -> String) -> Option<Range> {
        let nvtx = nvtx()?;
        let text = CString::new(name().replace('\0', " ")).ok()?;
        // SAFETY: a valid NUL-terminated string that outlives the call (NVTX copies it).
        unsafe { (nvtx.push)(text.as_ptr()) };
        Some(Range {
            _not_send: std::marker::PhantomData,
        })
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        if let Some(nvtx) = nvtx() {
            // SAFETY: closes the range this guard opened on this thread (it is not `Send`).
            unsafe { (nvtx.pop)() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_ranges_are_named_pipeline_slash_stage() {
        assert_eq!(stage_range_name("HeatStep", "save"), "HeatStep/save");
    }

    #[test]
    fn module_tables_cover_every_slot_and_refuse_unknown_modules() {
        assert_eq!(MODULE_SIZES.iter().sum::<usize>(), ALL_SLOTS);
        let mut size = 0;
        let mut table: FunctionTable = std::ptr::null_mut();
        // SAFETY: valid out-pointers; only the table's address is read, not written through.
        unsafe {
            assert_eq!(get_module_function_table(7, &mut table, &mut size), 0);
            assert_eq!(get_module_function_table(0, &mut table, &mut size), 0);
            assert_eq!(get_module_function_table(2, &mut table, &mut size), 1);
        }
        assert_eq!(size, 9);
        // SAFETY: only addresses are compared.
        let first: FunctionTable = unsafe { (&raw mut SLOTS.pointers).cast() };
        assert_eq!(table, first.wrapping_add(16));
        // SAFETY: as above.
        unsafe {
            assert!(!get_export_table(ETID_CALLBACKS).is_null());
            assert!(!get_export_table(ETID_VERSIONINFO).is_null());
            assert!(get_export_table(2).is_null());
        }
    }

    static PUSHED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    unsafe extern "C" fn fake_push(message: *const c_char) -> c_int {
        // SAFETY: `initialize`'s caller passes NUL-terminated text.
        let text = unsafe { std::ffi::CStr::from_ptr(message) };
        PUSHED
            .lock()
            .unwrap()
            .push(text.to_string_lossy().into_owned());
        0
    }

    unsafe extern "C" fn fake_pop() -> c_int {
        0
    }

    /// What a profiler's injection does: ask for the callbacks table, then for the core
    /// module's slots, and store its implementations in them.
    unsafe extern "C" fn fake_injection(get: GetExportTable) -> c_int {
        // SAFETY: the protocol: table 1 is a `CallbacksTable`, module 1 the core module.
        unsafe {
            let callbacks = get(ETID_CALLBACKS).cast::<CallbacksTable>();
            let mut table: FunctionTable = std::ptr::null_mut();
            let mut size = 0;
            if ((*callbacks).get_module_function_table)(1, &mut table, &mut size) != 1 {
                return 0;
            }
            assert_eq!(size, 16);
            *(*table.add(CORE_RANGE_PUSH_A)) = fake_push as *mut c_void;
            *(*table.add(CORE_RANGE_POP)) = fake_pop as *mut c_void;
        }
        1
    }

    unsafe extern "C" fn refusing_injection(_get: GetExportTable) -> c_int {
        0
    }

    #[test]
    fn an_injection_fills_the_core_slots_through_the_export_table() {
        // SAFETY: the only test touching `SLOTS` (the process's `NVTX` is not initialised
        // from it); the fakes follow the protocol.
        let (push, pop) = unsafe { initialize(fake_injection) }.unwrap();
        let name = CString::new(stage_range_name("Heat", "step")).unwrap();
        // SAFETY: the fake's own entry points, with a NUL-terminated name.
        unsafe {
            push(name.as_ptr());
            pop();
        }
        assert_eq!(*PUSHED.lock().unwrap(), ["Heat/step"]);
        // SAFETY: as above.
        let refused = unsafe { initialize(refusing_injection) };
        assert!(refused.is_err());
    }

    /// Without a profiler, no range is opened and the name is never built.
    #[test]
    fn without_an_injection_nothing_happens() {
        if std::env::var_os(NVTX_INJECTION_ENV).is_some() {
            return; // under a profiler or compute-sanitizer
        }
        assert!(!is_active());
        assert!(Range::push(|| unreachable!("no name without a profiler")).is_none());
    }
}
